-- Helpers shared by the full scripts. The fast paths (acquire_fast.lua, release_fast.lua)
-- are scripts of their own, so the common case does not pay for creating these functions.

local now_cached
local function now()
  if not now_cached then
    local t = redis.call('TIME')
    now_cached = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now_cached
end

-- The request token of the exclusive grant whose LOCK value is `held`: the first field of
-- our holder record, or the whole value where a foreign client holds the key.
local function token_of(held)
  return held and (string.match(held, '^{"t":"([^"]*)"') or held)
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

-- Calls visit(token, seq, record) for each waiter still refreshing its place, in queue
-- order, until visit returns true. Waiters met that stopped refreshing are dropped, so each
-- costs one look, once. The queue is read a page at a time, so a walk that ends early
-- reads little more of it than it visited: pages start at two waiters and double up to 32.
local function each_live(visit)
  local after, size = '-inf', 2
  while true do
    local page = redis.call('ZRANGEBYSCORE', QUEUE, after, '+inf', 'WITHSCORES', 'LIMIT', 0, size)
    size = math.min(size * 2, 32)
    if #page == 0 then return end
    for i = 1, #page, 2 do
      local other = page[i]
      after = '(' .. page[i + 1]
      local raw = redis.call('HGET', WAITERS, other)
      local info = raw and cjson.decode(raw)
      if info and tonumber(info.e) > now() then
        if visit(other, tonumber(page[i + 1]), info) then return end
      else
        redis.call('ZREM', QUEUE, other)
        redis.call('HDEL', WAITERS, other)
      end
    end
  end
end

-- Wakes the first live waiter: publishes its token on its client's channel.
local function wake_head()
  each_live(function(head, _, info)
    redis.call('PUBLISH', info.c, head)
    return true
  end)
end

-- Deletes the grant made under `token`, exclusive or shared. Returns 1 if it was there
-- and still valid, 0 otherwise.
local function delete_grant(token)
  if token_of(redis.call('GET', LOCK)) == token then
    redis.call('DEL', LOCK)
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
