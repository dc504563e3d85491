-- Breaks a lock's grants whoever holds them (an operator's `distlock break`): the grant
-- whose fencing token is ARGV[1], or every grant when ARGV[1] is ''. A foreign client's
-- lock has token 0, as has a holder record whose token is not written in yet. The fencing counter is bumped before any grant goes (seeded as a
-- grant would seed it: ARGV[2] is fence_ttl_ms), then the head waiter is woken.
-- Returns, for each grant broken, its stored value and its lease's milliseconds left
-- (-1: a key without a TTL).
local wanted = ARGV[1]
local function matches(fence)
  return wanted == '' or wanted == (fence or '0')
end

local doomed = {}
local held = redis.call('GET', LOCK)
-- A holder record the client's first try wrote lacks its token until the grant's first
-- renewal (see `renew.lua`): it reads as 0, as `inspect` shows it.
if held and matches(string.match(held, '^{"t":.*"f":"(%d+)"}$')) then
  table.insert(doomed, { held, redis.call('PTTL', LOCK) })
end
purge_leases()
local leases = redis.call('HGETALL', LEASE_INFO)
local shared = {}
for i = 1, #leases, 2 do
  if matches(string.match(leases[i + 1], '"f":"(%d+)"')) then
    local expiry = redis.call('ZSCORE', LEASES, leases[i])
    if expiry then
      table.insert(shared, leases[i])
      table.insert(doomed, { leases[i + 1], tonumber(expiry) - now() })
    end
  end
end
if #doomed == 0 then
  return {}
end

next_fence(ARGV[2])
if held and doomed[1][1] == held then
  redis.call('DEL', LOCK)
end
for _, token in ipairs(shared) do
  redis.call('ZREM', LEASES, token)
  redis.call('HDEL', LEASE_INFO, token)
end
wake_head()

local answer = {}
for _, grant in ipairs(doomed) do
  table.insert(answer, grant[1])
  table.insert(answer, grant[2])
end
return answer
