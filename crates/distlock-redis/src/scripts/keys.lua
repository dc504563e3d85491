-- Heads every script. The keys of one lock, always in this order:
-- The fast-path scripts take only the first five.
local LOCK, FENCE, QUEUE, LEASES, HOLDER, WAITERS, SEQ, LEASE_INFO =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
-- LOCK        string: the token of the exclusive holder (mutex or writer), with PX
-- FENCE       string: the fencing counter
-- QUEUE       zset: queued request token -> arrival number
-- WAITERS     hash: queued request token -> json {s, e, c, f, k, n, l, o, h, p}
-- HOLDER      string json: who holds LOCK {t, k, o, h, p, a, f}, with the same PX
-- SEQ         string: arrival numbers
-- LEASES      zset: shared grant token (reader, semaphore permits) -> expiry (server ms)
-- LEASE_INFO  hash: shared grant token -> json {k, n, l, o, h, p, a, f}
-- Large numbers are stored as text: cjson would round them to 14 digits.
