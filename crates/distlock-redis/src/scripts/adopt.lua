-- Take over the exclusive grant handed off under request token ARGV[1] with fencing token
-- ARGV[2], for the adopter's holder record ARGV[3] (a request's: t first, no f) with a
-- lease of ARGV[4] ms; ARGV[5] is the fencing counter's lifetime in ms.
-- Returns the adopter's fencing token, or -1 if the grant is not held so any more.
local held = redis.call('GET', LOCK)
if not held or held == ARGV[1] or token_of(held) ~= ARGV[1] then
  return -1
end
if cjson.decode(held).f ~= ARGV[2] then
  return -1
end
local fence = redis.call('INCR', FENCE)
if fence == 1 then
  fence = now() * 1000
  redis.call('SET', FENCE, text(fence), 'PX', ARGV[5])
end
redis.call('SET', LOCK, string.sub(ARGV[3], 1, -2) .. ',"f":"' .. text(fence) .. '"}', 'PX', ARGV[4])
return fence
