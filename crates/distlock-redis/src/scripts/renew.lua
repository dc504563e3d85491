-- Extend our grant.  ARGV[1] token, ARGV[2] ttl_ms.
-- Returns 1 if renewed, 0 if the grant was no longer ours.
if token_of(redis.call('GET', LOCK)) == ARGV[1] then
  redis.call('PEXPIRE', LOCK, ARGV[2])
  return 1
end
local expiry = redis.call('ZSCORE', LEASES, ARGV[1])
if expiry and tonumber(expiry) > now() then
  redis.call('ZADD', LEASES, 'XX', now() + tonumber(ARGV[2]), ARGV[1])
  keep_alive(tonumber(ARGV[2]) + 1000, LEASES, LEASE_INFO)
  return 1
end
return 0
