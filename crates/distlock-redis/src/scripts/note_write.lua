-- Write the lock's note if ARGV[1] is a live grant of it.  KEYS[8] the note; ARGV[2] the
-- value, ARGV[3] the grant's fencing token, ARGV[4] the quiet window in ms ('': the
-- window the note had goes on).
-- Returns the server's time of the write (ms), or -1 if the grant is not live. An exclusive
-- grant's record gets its fencing token here if it lacks it still (see `record_fence`):
-- whoever reads the note then finds the token it names on the holder too.
local NOTE = KEYS[8]
local held = redis.call('GET', LOCK)
local live = token_of(held) == ARGV[1]
if live then
  record_fence(held, ARGV[3])
else
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
