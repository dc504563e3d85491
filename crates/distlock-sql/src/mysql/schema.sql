-- Keys compare byte for byte (VARBINARY: no collation, so no case folding, no accent
-- folding and no trailing-space padding, which every utf8mb4 collation of MySQL 5.7 and
-- MariaDB applies): `Orders`, `orders` and `orders ` are three locks. A lock key is the name
-- itself (its UTF-8 bytes), or for names longer than 64 characters its hashed form (see
-- `lock_key`); rows keep the full name beside it.

-- Lease mode: the fencing counter of each key, only ever increased. Changes to one key's
-- leases and waiters run in transactions that first lock this row.
CREATE TABLE IF NOT EXISTS distlock_fence (
    lock_key VARBINARY(256) NOT NULL PRIMARY KEY,
    value    BIGINT NOT NULL
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS distlock_lease (
    token          VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    lock_key       VARBINARY(256) NOT NULL,
    name           TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    owner          VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    kind           VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    lim            BIGINT NOT NULL,
    permits        BIGINT NOT NULL,
    fence          BIGINT NOT NULL,
    expires_at_ms  BIGINT NOT NULL,
    host           TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    pid            BIGINT NOT NULL,
    acquired_at_ms BIGINT NOT NULL,
    KEY distlock_lease_by_key (lock_key)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS distlock_waiter (
    seq           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    token         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL UNIQUE,
    lock_key      VARBINARY(256) NOT NULL,
    name          TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    owner         VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    kind          VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    lim           BIGINT NOT NULL,
    permits       BIGINT NOT NULL,
    fair          BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    host          TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    pid           BIGINT NOT NULL,
    since_ms      BIGINT NOT NULL,
    wake          VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    KEY distlock_waiter_by_key (lock_key)
) ENGINE = InnoDB;

-- Session mode: the last grant of each key and its fencing token. In memory (a lock dies
-- with its connection, and tokens never fall below the database's clock in microseconds,
-- so emptying on a restart loses nothing), which keeps an acquire free of disk flushes.
CREATE TABLE IF NOT EXISTS distlock_session_lock (
    lock_key VARBINARY(256) NOT NULL PRIMARY KEY,
    fence    BIGINT NOT NULL,
    conn     BIGINT NOT NULL,
    token    VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    owner    VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    host     VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    pid      BIGINT NOT NULL,
    since_ms BIGINT NOT NULL,
    ttl_ms   BIGINT NOT NULL
) ENGINE = MEMORY MAX_ROWS = 1000000;

-- Session mode: what each connection waiting in `GET_LOCK` waits for (one row per
-- connection, overwritten by its next wait).
CREATE TABLE IF NOT EXISTS distlock_session_waiter (
    conn     BIGINT NOT NULL PRIMARY KEY,
    lock_key VARBINARY(256) NOT NULL,
    token    VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    owner    VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    host     VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    pid      BIGINT NOT NULL,
    since_ms BIGINT NOT NULL
) ENGINE = MEMORY;

-- Session mode: the full names behind hashed keys, for `status`.
CREATE TABLE IF NOT EXISTS distlock_name (
    lock_key VARBINARY(256) NOT NULL PRIMARY KEY,
    name     TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL
) ENGINE = InnoDB
