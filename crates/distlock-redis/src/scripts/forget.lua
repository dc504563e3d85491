-- Deletes a lock's fencing counter if it is at least ARGV[1] microseconds below the
-- server's clock: a later grant seeds it again from that clock, above every token it gave.
-- KEYS[1]: the counter. Returns 1 if it was deleted, else 0.
local counter = tonumber(redis.call('GET', KEYS[1]) or '')
if not counter then
  return 0
end
local t = redis.call('TIME')
if counter < tonumber(t[1]) * 1000000 + tonumber(t[2]) - tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
