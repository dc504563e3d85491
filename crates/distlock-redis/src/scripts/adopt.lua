-- Take over the exclusive grant handed off under request token ARGV[1] with fencing token
-- ARGV[2], for the adopter's holder record ARGV[3] (a request's: t first, no f) with a
-- lease of ARGV[4] ms; ARGV[5] is the fencing counter's lifetime in ms.
-- Returns the adopter's fencing token, or -1 if the grant is not held so any more.
local held = redis.call('GET', LOCK)
if not held or held == ARGV[1] or token_of(held) ~= ARGV[1] then
  return -1
end
-- A record the client's first try wrote may lack the token still (see `renew.lua`): the
-- request token, a secret, names the grant alone then.
local recorded = cjson.decode(held).f
if recorded and recorded ~= ARGV[2] then
  return -1
end
local fence = next_fence(ARGV[5])
local adopted = string.sub(ARGV[3], 1, -2) .. ',"f":"' .. text(fence) .. '"}'
if redis.call('EXISTS', QUEUE) == 1 then
  -- Others wait: its release must pass the lock on.
  adopted = waited_for(adopted)
end
redis.call('SET', LOCK, adopted, 'PX', ARGV[4])
return fence
