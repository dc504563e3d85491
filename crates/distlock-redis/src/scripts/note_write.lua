-- Write the lock's note if ARGV[1] is a live grant of it.  KEYS[8] the note; ARGV[2] the
-- value, ARGV[3] the grant's fencing token, ARGV[4] the quiet window in ms ('': the
-- window the note had goes on).
-- Returns the server's time of the write (ms), or -1 if the grant is not live.
local NOTE = KEYS[8]
local live = token_of(redis.call('GET', LOCK)) == ARGV[1]
if not live then
  local expiry = redis.call('ZSCORE', LEASES, ARGV[1])
  live = expiry and tonumber(expiry) > now()
end
if not live then
  return -1
end
redis.call('HSET', NOTE, 'v', ARGV[2], 't', ARGV[3], 'w', text(now()))
if ARGV[4] ~= '' then
  redis.call('HSET', NOTE, 'q', text(now() + tonumber(ARGV[4])))
end
return now()
