-- RedLock: stamp a grant with the token its majority agreed on. Raises the fencing counter
-- the lock counts on (its slot's) to at least ARGV[1] (so any later majority, which shares a master with this one,
-- counts on from it) and, if the lock holds the grant's holder record (ARGV[2] its request
-- token), writes that token into it, so every master shows the token the holder was given.
-- KEYS[1] the fencing counter, KEYS[2] the lock; ARGV[3] the counter's lifetime in ms
-- (kept if it has one). Returns the counter.
local floor = tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < floor then
  if redis.call('PTTL', KEYS[1]) > 0 then
    redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
  else
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
  end
  current = floor
end
local held = redis.call('GET', KEYS[2])
local mine = '{"t":"' .. ARGV[2] .. '"'
if held and string.sub(held, 1, #mine) == mine then
  -- The record ends with its fencing token: ,"f":"<digits>"}
  local stamped = string.gsub(held, ',"f":"%d*"}$', ',"f":"' .. ARGV[1] .. '"}')
  if stamped ~= held then
    redis.call('SET', KEYS[2], stamped, 'KEEPTTL')
  end
end
return current
