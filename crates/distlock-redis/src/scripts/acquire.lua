-- Decide a request, granting it if it may go now (the rules of distlock_core::admit):
-- queues, shared grants, fairness, starvation. An exclusive request that has not queued
-- itself tries first without a script (first_try.rs; on a RedLock master, with
-- acquire_fast.lua), and comes here where that does not grant it.
-- ARGV: token, ttl_ms, record, kind, wait (0|1), fair (0|1), waiter_lease_ms,
--       starvation_ms, wake channel, permits, limit, fence_ttl_ms, hand-off claim ms (0:
--       the request takes no hand-offs; see `hand_on`); for a RedLock master, the least
--       token (the client's clock in microseconds) and the request's place in the queue
--       (the client's clock in microseconds when it first tried: every master then
--       orders the same waiters alike, where each would order them by arrival).
-- `record` is the holder record without its fencing token, a JSON object the client wrote:
-- {t, k, n, l, o, h, p, a}, t first; the script appends f (the token) when it grants.
-- Returns {1, fencing_token} when granted (a grant already made under the token, by a
-- hand-off say, is renewed for ttl_ms and answered so again), {0, ms until a holder's
-- lease ends or -1, 1 if a foreign client (not distlock) holds the lock, else 0, the
-- server's clock in ms}.
-- A request that may never mix with the current holders fails with "INVALID …".
local token = ARGV[1]
local ttl = tonumber(ARGV[2])
local record = ARGV[3]

local held = redis.call('GET', LOCK)
local holder_token = token_of(held)
local wait = ARGV[5] == '1'
local fair = ARGV[6] == '1'
local me = { k = ARGV[4], n = tonumber(ARGV[10]), l = tonumber(ARGV[11]) }

local function semaphore(kind) return kind == 'semaphore' end

local function fits(claims)
  if exclusive(me.k) then
    return #claims == 0
  end
  if me.k == 'read' then
    for _, c in ipairs(claims) do
      if exclusive(c.k) then return false end
    end
    return true
  end
  local taken = 0
  for _, c in ipairs(claims) do taken = taken + c.n end
  return taken + me.n <= me.l
end

-- Whether a holder or waiter of kind `c` may share the name with this request. The kinds
-- fall into classes (locks of any kind; semaphores of one size) that mix only within
-- themselves, so a request that agrees with one live waiter agrees with them all.
local function compatible(c)
  if c.k == me.k then
    if semaphore(c.k) and c.l ~= me.l then
      return redis.error_reply('INVALID this semaphore is in use with ' .. c.l .. ' permits, not ' .. me.l)
    end
  elseif semaphore(c.k) ~= semaphore(me.k) then
    return redis.error_reply('INVALID this name is in use as a ' .. c.k .. ', not as a ' .. me.k)
  end
end

-- Grants the request; `queued` says whether it has a place in the queue to give up.
local function grant(queued)
  local fence = next_fence(ARGV[12], tonumber(ARGV[14]))
  if queued then
    leave_queue(token)
  end
  local granted = string.sub(record, 1, -2) .. ',"f":"' .. text(fence) .. '"}'
  if redis.call('EXISTS', QUEUE) == 1 then
    -- Others wait: its release must pass the lock on.
    granted = waited_for(granted)
  end
  store_grant(token, me.k, granted, ttl)
  if not exclusive(me.k) then
    -- Others may share with us: let the next waiter look.
    wake_head()
  end
  return {1, fence}
end

local shared = redis.call('EXISTS', LEASES) == 1
local queue_exists = redis.call('EXISTS', QUEUE) == 1

-- Current holders. A lock already ours (a retry after a lost answer) is the same grant;
-- but a record of ours without a fencing token is the client's first try's, a grant that
-- did not stand (see first_try.rs): taken back, and decided afresh.
local holders = {}
local took_back = false
if holder_token then
  -- Our own holder record, or a foreign client's token (which holds it as a mutex).
  local current = holder_token ~= held and cjson.decode(held) or { k = 'mutex' }
  if holder_token ~= token then
    table.insert(holders, { k = current.k, n = 1, l = 1 })
  elseif current.f then
    redis.call('PEXPIRE', LOCK, ttl)
    return {1, tonumber(current.f)}
  else
    redis.call('DEL', LOCK)
    held, holder_token, took_back = false, nil, true
  end
end
if shared then
  local mine = redis.call('HGET', LEASE_INFO, token)
  local expiry = redis.call('ZSCORE', LEASES, token)
  if mine and expiry and tonumber(expiry) > now() then
    redis.call('ZADD', LEASES, 'XX', now() + ttl, token)
    return {1, tonumber(cjson.decode(mine).f)}
  end
  purge_leases()
  for _, raw in ipairs(redis.call('HVALS', LEASE_INFO)) do
    local info = cjson.decode(raw)
    table.insert(holders, { k = info.k, n = info.n, l = info.l })
  end
end

-- How soon a request that yielded a free lock to the waiters ahead of it looks again.
local YIELDED_RETRY_MS = 50

-- A waiter that has waited past the starvation limit keeps newcomers from overtaking it,
-- unless it was refused for a foreign client's lock lately: clients other than distlock
-- overtake it whatever it keeps, so the other distlock waiters would only yield their
-- chances to them.
local function starving(info)
  local t = now()
  if info.x and tonumber(info.x) > t - FOREIGN_RECENT then return false end
  return tonumber(info.s) <= t - tonumber(ARGV[8])
end

-- Refuses a request that may never mix with the current holders or waiters (`refused`,
-- compatible's error); a lock this request took back is passed on first, as a release
-- would (a script's writes stand whatever it answers).
local function mismatched(refused)
  if took_back then
    hand_on(false, ARGV[12])
  end
  return refused
end

-- The queue: only as much of it as the decision needs, so that the cost of a poll does not
-- grow with the number of waiters in the common cases.
-- * An exclusive request, or one the holders leave no room for, needs the first live
--   waiter alone. Waiters queue in arrival order, so it is ahead of everyone else and has
--   waited the longest: it decides both "anyone ahead" (fair) and "anyone starving ahead"
--   (not fair).
-- * Any other request needs the waiters ahead of it (fair), or the starving ones, which
--   come first (not fair); a reader that is not fair also needs to know whether a writer
--   waits anywhere.
-- Every queued request was checked against the waiters before it (see `compatible`), so
-- checking the first live one covers the kinds of all.
local my_seq = false
local ahead, starving_ahead, writer_waits = {}, {}, false
if queue_exists then
  my_seq = redis.call('ZSCORE', QUEUE, token)
  if my_seq then my_seq = tonumber(my_seq) end
  local first_only = exclusive(me.k) or not fits(holders)
  local writers_matter = me.k == 'read' and not fair
  local checked, refused = false, nil
  each_live(function(other, seq, info)
    local claim = { k = info.k, n = info.n, l = info.l }
    if not checked then
      checked = true
      refused = compatible(claim)
      if refused then return true end
    end
    if other == token then
      -- Everyone further on is behind this request.
      return first_only or not writers_matter
    end
    if exclusive(info.k) then writer_waits = true end
    if not my_seq or seq < my_seq then
      table.insert(ahead, claim)
      if starving(info) then
        table.insert(starving_ahead, claim)
      elseif not fair and not writers_matter then
        -- No one further on has waited longer.
        return true
      end
    end
    return first_only or (writers_matter and writer_waits)
  end)
  if refused then return mismatched(refused) end
end
for _, c in ipairs(holders) do
  local refused = compatible(c)
  if refused then return mismatched(refused) end
end

local function with(extra)
  local all = {}
  for _, c in ipairs(holders) do table.insert(all, c) end
  for _, c in ipairs(extra) do table.insert(all, c) end
  return all
end

local granted = fits(holders)
if granted then
  if fair then
    granted = fits(with(ahead))
  else
    granted = fits(with(starving_ahead)) and not (me.k == 'read' and writer_waits)
  end
end

if granted then
  return grant(my_seq)
end

-- A lock a foreign client holds (its bare token, not our record).
local foreign = held and holder_token == held

-- The lock this request took back is free again: it goes to those it was refused for,
-- as a release would pass it on.
if took_back then
  hand_on(false, ARGV[12])
end

if wait then
  local raw = redis.call('HGET', WAITERS, token)
  local info = raw and cjson.decode(raw)
  if not info then
    info = cjson.decode(record)
    info.s, info.c, info.f, info.g = text(now()), ARGV[9], fair, tonumber(ARGV[13])
    redis.call('ZADD', QUEUE, ARGV[15] or redis.call('INCR', SEQ), token)
  end
  info.e = text(now() + tonumber(ARGV[7]))
  if foreign then info.x = text(now()) end
  redis.call('HSET', WAITERS, token, cjson.encode(info))
  keep_alive(2 * tonumber(ARGV[7]), QUEUE, WAITERS, SEQ)
  -- Its release must wake this waiter.
  mark_waited()
end

local soonest = redis.call('PTTL', LOCK)
local first = redis.call('ZRANGE', LEASES, 0, 0, 'WITHSCORES')
if #first > 0 then
  local left = tonumber(first[2]) - now()
  if soonest < 0 or left < soonest then soonest = left end
end
-- Refused with no holder at all while a waiter is ahead: the lock is free, and this request
-- yields it to those ahead (those starving, or all of them when fair). The one that takes it
-- next may keep it on a lease that ends unseen (its holder paused or killed), which no
-- wake-up announces: this request looks again soon, to learn when that lease ends, instead
-- of sleeping until its queue entry's refresh.
if soonest < 0 and not held and #ahead > 0 then
  soonest = YIELDED_RETRY_MS
end
-- A lock a foreign client holds gets no wake-up when it goes: the caller polls it with a
-- backoff instead of sleeping on the holder's TTL.
return {0, soonest, foreign and 1 or 0, now()}
