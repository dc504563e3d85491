-- Heads every full script. The keys of one lock, always in this order (the fast paths,
-- scripts of their own, take a few of them by number):
local LOCK, FENCE, QUEUE, LEASES, WAITERS, SEQ, LEASE_INFO =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
-- LOCK        string: the exclusive holder (mutex or writer) with PX: its holder record,
--             json {t, w, k, n, l, o, h, p, a, v, f} with the request token t first; w: 1
--             where someone waited for it (see `waited_for`), v: hand-offs in a row, f: the
--             fencing token (written in later where the client's first try made the grant:
--             see `record_fence`); a foreign client's lock holds its own token instead
-- FENCE       string: the fencing counter, shared by the server's names (a cluster's: the
--             slot's)
-- QUEUE       zset: queued request token -> arrival number
-- LEASES      zset: shared grant token (reader, semaphore permits) -> expiry (server ms)
-- WAITERS     hash: queued request token -> json {s, e, c, f, x, k, n, l, o, h, p}; x: when
--             it was last refused for a foreign client's lock
-- SEQ         string: arrival numbers
-- LEASE_INFO  hash: shared grant token -> json {k, n, l, o, h, p, a, f}
-- Large numbers are stored as text: cjson would round them to 14 digits.
