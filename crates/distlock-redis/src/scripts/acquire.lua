-- Decide a request for an exclusive lock, granting it if it may go now.
-- KEYS[1] lock (string: the holder's token)   KEYS[2] fencing counter
-- KEYS[3] queue (zset token -> seq)           KEYS[4] waiter info (hash token -> json)
-- KEYS[5] holder info (string json)           KEYS[6] queue sequence
-- ARGV: token, ttl_ms, wait (0|1), fair (0|1), waiter_lease_ms, starvation_ms,
--       wake channel, owner, host, pid, requested_at_ms (the client's clock, for display)
-- Returns {1, fencing_token} when granted, {0, ms until the holder's lease ends or -1}.
-- Large numbers are stored as text: cjson would round them to 14 digits.
local token = ARGV[1]
local ttl = tonumber(ARGV[2])
local wait = ARGV[3] == '1'
local fair = ARGV[4] == '1'

local now_cached
local function now()
  if not now_cached then
    local t = redis.call('TIME')
    now_cached = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now_cached
end

-- Already ours (a retry after a lost answer): the same grant again.
if redis.call('GET', KEYS[1]) == token then
  local raw = redis.call('GET', KEYS[5])
  local record = raw and cjson.decode(raw)
  if record and record.t == token then
    return {1, tonumber(record.f)}
  end
end

local blocked = false
if redis.call('EXISTS', KEYS[3]) == 1 then
  local my_seq = redis.call('ZSCORE', KEYS[3], token)
  if my_seq then my_seq = tonumber(my_seq) end
  local queued = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
  for i = 1, #queued, 2 do
    local other, seq = queued[i], tonumber(queued[i + 1])
    local raw = redis.call('HGET', KEYS[4], other)
    local info = raw and cjson.decode(raw)
    if not info or tonumber(info.e) <= now() then
      redis.call('ZREM', KEYS[3], other)
      redis.call('HDEL', KEYS[4], other)
    elseif other ~= token and (not my_seq or seq < my_seq) then
      if fair or tonumber(info.s) <= now() - tonumber(ARGV[6]) then
        blocked = true
      end
    end
  end
end

if not blocked and redis.call('SET', KEYS[1], token, 'NX', 'PX', ttl) then
  -- Strictly increasing. A counter that starts afresh (first use, or a restart that lost
  -- it) starts at the server's clock in microseconds, above every token granted before.
  local fence = redis.call('INCR', KEYS[2])
  if fence == 1 then
    fence = now() * 1000
    redis.call('SET', KEYS[2], string.format('%.0f', fence))
  end
  if redis.call('HDEL', KEYS[4], token) == 1 then
    redis.call('ZREM', KEYS[3], token)
  end
  redis.call('SET', KEYS[5], cjson.encode({
    t = token, o = ARGV[8], h = ARGV[9], p = tonumber(ARGV[10]),
    a = ARGV[11], f = string.format('%.0f', fence)
  }), 'PX', ttl)
  return {1, fence}
end

if wait then
  local raw = redis.call('HGET', KEYS[4], token)
  local info = raw and cjson.decode(raw)
  if not info then
    info = {
      s = string.format('%.0f', now()), c = ARGV[7], f = fair, o = ARGV[8], h = ARGV[9],
      p = tonumber(ARGV[10])
    }
    redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[6]), token)
  end
  info.e = string.format('%.0f', now() + tonumber(ARGV[5]))
  redis.call('HSET', KEYS[4], token, cjson.encode(info))
end
return {0, redis.call('PTTL', KEYS[1])}
