-- Rows churn (every grant, wait and renewal writes): leave room on each page for
-- updates in place, and vacuum after a fixed number of dead rows, not a share of a
-- table that is always small.
CREATE TABLE IF NOT EXISTS distlock_fence (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200);

CREATE TABLE IF NOT EXISTS distlock_lease (
    token          TEXT PRIMARY KEY,
    name           TEXT NOT NULL,
    owner          TEXT NOT NULL,
    kind           TEXT NOT NULL,
    lim            BIGINT NOT NULL,
    permits        BIGINT NOT NULL,
    fence          BIGINT NOT NULL,
    expires_at_ms  BIGINT NOT NULL,
    host           TEXT NOT NULL,
    pid            BIGINT NOT NULL,
    acquired_at_ms BIGINT NOT NULL
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200);
CREATE INDEX IF NOT EXISTS distlock_lease_by_name ON distlock_lease (name);

CREATE TABLE IF NOT EXISTS distlock_waiter (
    seq           BIGSERIAL PRIMARY KEY,
    token         TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    owner         TEXT NOT NULL,
    kind          TEXT NOT NULL,
    lim           BIGINT NOT NULL,
    permits       BIGINT NOT NULL,
    fair          BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    host          TEXT NOT NULL,
    pid           BIGINT NOT NULL,
    since_ms      BIGINT NOT NULL,
    wake          TEXT NOT NULL
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200);
CREATE INDEX IF NOT EXISTS distlock_waiter_by_name ON distlock_waiter (name);

CREATE UNLOGGED TABLE IF NOT EXISTS distlock_session (
    backend_pid INTEGER PRIMARY KEY,
    token       TEXT NOT NULL,
    key         BIGINT NOT NULL,
    name        TEXT NOT NULL,
    owner       TEXT NOT NULL,
    kind        TEXT NOT NULL,
    fair        BIGINT NOT NULL,
    fence       BIGINT,
    host        TEXT NOT NULL,
    pid         BIGINT NOT NULL,
    since_ms    BIGINT NOT NULL,
    ttl_ms      BIGINT NOT NULL
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200);
CREATE INDEX IF NOT EXISTS distlock_session_by_key ON distlock_session (key)

