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

local function exclusive(kind) return kind == 'mutex' or kind == 'write' end

-- Stores a grant under `token` of kind `kind` with holder record `record`, for `ms`: the
-- exclusive key, or a shared lease.
local function store_grant(token, kind, record, ms)
  if exclusive(kind) then
    redis.call('SET', LOCK, record, 'PX', ms)
  else
    redis.call('ZADD', LEASES, now() + ms, token)
    redis.call('HSET', LEASE_INFO, token, record)
    keep_alive(ms + 1000, LEASES, LEASE_INFO)
  end
end

-- Writes fencing token `fence` (text) into `held`, our exclusive holder record, where the
-- client's first try wrote it without one (see first_try.rs), renewing it for `ms` where
-- given. Returns whether it wrote.
local function record_fence(held, fence, ms)
  if string.find(held, '"f":"', 1, true) then
    return false
  end
  local recorded = string.sub(held, 1, -2) .. ',"f":"' .. fence .. '"}'
  if ms then
    redis.call('SET', LOCK, recorded, 'PX', ms)
  else
    redis.call('SET', LOCK, recorded, 'KEEPTTL')
  end
  return true
end

-- Holder record `record` marked as waited for, `"w":1` after its token: its release then
-- goes to the full script, which passes the lock on (the release fast path matches only
-- records whose token `"k"` follows; see `unwaited_start` in record.rs). A foreign token,
-- or a record marked already, comes back as it is.
local function waited_for(record)
  local head = string.match(record, '^{"t":"[^"]*",')
  if not head or string.sub(record, #head + 1, #head + 6) == '"w":1,' then
    return record
  end
  return head .. '"w":1,' .. string.sub(record, #head + 1)
end

-- Marks the exclusive grant held now, if it is one of ours, as waited for.
local function mark_waited()
  local held = redis.call('GET', LOCK)
  if held then
    local marked = waited_for(held)
    if marked ~= held then
      redis.call('SET', LOCK, marked, 'KEEPTTL')
    end
  end
end

-- Takes `token` out of the queue.
local function leave_queue(token)
  redis.call('ZREM', QUEUE, token)
  redis.call('HDEL', WAITERS, token)
end

-- A fencing counter below this was never seeded: an INCR made it afresh (the client's
-- first try counts with a plain INCR, so it may have counted a few). Seeded, a counter
-- starts at the server's clock in microseconds, far above it.
local SEEDED_FROM = 1e12

-- The next fencing token: strictly increasing. A counter that starts afresh (first use, a
-- restart that lost it, or the end of its lifetime, fence_ttl_ms after it was seeded)
-- starts at the server's clock in microseconds, above every token granted before; a
-- RedLock master's counter behind the client's clock (`floor`) is raised to it.
local function next_fence(fence_ttl_ms, floor)
  local fence = redis.call('INCR', FENCE)
  if fence < SEEDED_FROM then
    fence = math.max(now() * 1000, floor or 0)
    redis.call('SET', FENCE, text(fence), 'PX', fence_ttl_ms)
  elseif floor and fence < floor then
    fence = floor
    redis.call('SET', FENCE, text(fence), 'KEEPTTL')
  end
  return fence
end

-- How many hand-offs in a row a lock makes before one release leaves it free for a
-- moment instead (waking the head waiter to try, as without hand-offs): clients other
-- than distlock, which poll the key and wait in no queue, then get their chance.
local HAND_OFFS_IN_A_ROW = 16

-- A waiter refused for a foreign client's lock within this many milliseconds.
local FOREIGN_RECENT = 1000

-- Passes a lock just freed on: grants it at once to the waiters at the head of the queue
-- that it now admits, in queue order, where each asked for hand-offs (its record's g: the
-- claim's milliseconds) and no client other than distlock was met lately: one writer (or
-- mutex), or the readers up to the first writer, or the semaphore requests whose permits
-- fit; otherwise wakes the head as `wake_head` does. Each grant lives for the claim only:
-- its waiter confirms it with its first renewal, or it lapses. A waiter learns of its
-- grant by a message on its client's channel, `<token> <fencing token> <server ms>`; where
-- no client listens there (gone), the grant is withdrawn and the next waiter looked at.
-- The waiter after those granted is told `<token> watch <claim ms>`, so that it looks
-- again when an unconfirmed claim would have lapsed. `released` is the holder record of
-- the exclusive grant just released, or false; `fence_ttl_ms` as for `next_fence`.
local function hand_on(released, fence_ttl_ms)
  local row = released and tonumber(string.match(released, '"v":(%d+)')) or 0
  if row >= HAND_OFFS_IN_A_ROW or redis.call('EXISTS', LOCK) == 1 then
    wake_head()
    return
  end
  purge_leases()
  -- What the shared grants still held take: readers, or semaphore permits.
  local readers, taken = false, 0
  for _, raw in ipairs(redis.call('HVALS', LEASE_INFO)) do
    local holder = cjson.decode(raw)
    if holder.k == 'read' then readers = true else taken = taken + holder.n end
  end
  -- How many were granted, the longest claim among them, and whether the last took the
  -- lock whole.
  local granted, longest, whole = 0, 0, false
  each_live(function(head, _, info)
    local claim = tonumber(info.g or 0)
    local foreign = info.x and tonumber(info.x) > now() - FOREIGN_RECENT
    local fits
    if whole then
      fits = false
    elseif exclusive(info.k) then
      fits = granted == 0 and not readers and taken == 0
    elseif info.k == 'read' then
      fits = true
    else
      fits = taken + info.n <= info.l
    end
    if foreign or claim <= 0 or not fits then
      if granted == 0 then
        redis.call('PUBLISH', info.c, head)
      else
        redis.call('PUBLISH', info.c, head .. ' watch ' .. text(longest))
      end
      return true
    end
    local fence = text(next_fence(fence_ttl_ms))
    local fields = {}
    for key, value in pairs(info) do
      if key ~= 't' and key ~= 's' and key ~= 'e' and key ~= 'c' and key ~= 'f'
        and key ~= 'x' and key ~= 'g' then
        fields[key] = value
      end
    end
    fields.v = row + 1
    -- Marked as waited for: those behind it are woken by its release.
    local record = '{"t":"' .. head .. '","w":1,' .. string.sub(cjson.encode(fields), 2, -2)
      .. ',"f":"' .. fence .. '"}'
    store_grant(head, info.k, record, claim)
    leave_queue(head)
    if redis.call('PUBLISH', info.c, head .. ' ' .. fence .. ' ' .. text(now())) > 0 then
      granted, longest = granted + 1, math.max(longest, claim)
      if exclusive(info.k) then
        whole = true
      elseif info.k == 'read' then
        readers = true
      else
        taken = taken + info.n
      end
      return false
    end
    -- Nobody listens on its client's channel: that client is gone.
    delete_grant(head)
    return false
  end)
end
