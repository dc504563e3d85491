-- Extend our grant.  ARGV[1] token, ARGV[2] ttl_ms; ARGV[3], where given, the grant's
-- fencing token, for an exclusive grant whose holder record the client's first try wrote
-- without it: written in where the record still lacks it.
-- Returns 1 if renewed, 0 if the grant was no longer ours.
local held = redis.call('GET', LOCK)
if token_of(held) == ARGV[1] then
  if not (ARGV[3] and record_fence(held, ARGV[3], ARGV[2])) then
    redis.call('PEXPIRE', LOCK, ARGV[2])
  end
  return 1
end
local expiry = redis.call('ZSCORE', LEASES, ARGV[1])
if expiry and tonumber(expiry) > now() then
  redis.call('ZADD', LEASES, 'XX', now() + tonumber(ARGV[2]), ARGV[1])
  keep_alive(tonumber(ARGV[2]) + 1000, LEASES, LEASE_INFO)
  return 1
end
return 0
