CREATE TABLE IF NOT EXISTS distlock_fence (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS distlock_lease (
    token          TEXT PRIMARY KEY,
    name           TEXT NOT NULL,
    owner          TEXT NOT NULL,
    kind           TEXT NOT NULL,
    lim            INTEGER NOT NULL,
    permits        INTEGER NOT NULL,
    fence          INTEGER NOT NULL,
    expires_at_ms  INTEGER NOT NULL,
    host           TEXT NOT NULL,
    pid            INTEGER NOT NULL,
    acquired_at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS distlock_lease_by_name ON distlock_lease (name);

CREATE TABLE IF NOT EXISTS distlock_waiter (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    token         TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    owner         TEXT NOT NULL,
    kind          TEXT NOT NULL,
    lim           INTEGER NOT NULL,
    permits       INTEGER NOT NULL,
    fair          INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    since_ms      INTEGER NOT NULL,
    wake          TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS distlock_waiter_by_name ON distlock_waiter (name);

CREATE TABLE IF NOT EXISTS distlock_floor (
    id INTEGER PRIMARY KEY,
    n  INTEGER NOT NULL
);
INSERT OR IGNORE INTO distlock_floor (id, n) VALUES (1, 0);

CREATE TABLE IF NOT EXISTS distlock_clock (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    boot      TEXT NOT NULL,
    anchor_ms INTEGER NOT NULL
);

-- Each lock's note (a job's run record), written under a live grant, its times on the
-- lease clock.
CREATE TABLE IF NOT EXISTS distlock_note (
    name           TEXT PRIMARY KEY,
    value          TEXT NOT NULL,
    fence          INTEGER NOT NULL,
    written_at_ms  INTEGER NOT NULL,
    quiet_until_ms INTEGER
) WITHOUT ROWID;
