-- Helpers shared by the scripts' general paths. Each script's fast path comes before
-- them, so the common case does not pay for creating these functions.

local now_cached
local function now()
  if not now_cached then
    local t = redis.call('TIME')
    now_cached = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now_cached
end

local function text(n)
  return string.format('%.0f', n)
end

-- Drops shared grants whose lease ended.
local function purge_leases()
  local expired = redis.call('ZRANGEBYSCORE', LEASES, '-inf', now())
  for _, token in ipairs(expired) do
    redis.call('HDEL', LEASE_INFO, token)
  end
  if #expired > 0 then
    redis.call('ZREMRANGEBYSCORE', LEASES, '-inf', now())
  end
end

-- The first waiter in the queue still refreshing its place: its token and record, or nil.
-- The waiters in front of it that stopped refreshing are dropped on the way, so the cost
-- is one look, plus one per dead waiter dropped (once), however long the queue.
local function first_live()
  while true do
    local head = redis.call('ZRANGE', QUEUE, 0, 0)[1]
    if not head then return nil end
    local raw = redis.call('HGET', WAITERS, head)
    local info = raw and cjson.decode(raw)
    if info and tonumber(info.e) > now() then
      return head, info
    end
    redis.call('ZREM', QUEUE, head)
    redis.call('HDEL', WAITERS, head)
  end
end

-- Wakes the first live waiter: publishes its token on its client's channel.
local function wake_head()
  local head, info = first_live()
  if head then
    redis.call('PUBLISH', info.c, head)
  end
end

-- Deletes the grant made under `token`, exclusive or shared. Returns 1 if it was there
-- and still valid, 0 otherwise.
local function delete_grant(token)
  if redis.call('GET', LOCK) == token then
    redis.call('DEL', LOCK, HOLDER)
    return 1
  end
  local expiry = redis.call('ZSCORE', LEASES, token)
  if expiry then
    redis.call('ZREM', LEASES, token)
    redis.call('HDEL', LEASE_INFO, token)
    if tonumber(expiry) > now() then
      return 1
    end
  end
  return 0
end

-- Keeps `keys` alive for at least `ms` more milliseconds, so bookkeeping of locks nobody
-- uses any more goes away on its own instead of leaking.
local function keep_alive(ms, ...)
  for _, key in ipairs({...}) do
    if redis.call('PTTL', key) < ms then
      redis.call('PEXPIRE', key, ms)
    end
  end
end
