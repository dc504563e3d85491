-- Helpers of Redisson's fair-lock queue, put before the scripts that use it. The queue
-- is a list of waiters' fields; beside it a sorted set of each waiter's deadline (ms): a
-- Java waiter not granted by its deadline is taken for gone. distlock's waiters also keep
-- a sorted set of when each last polled (ms, server time), so one whose process died
-- leaves the queue a lease after its last poll, or at a release that finds nobody
-- listening for it once it is overdue for a poll, rather than at a deadline reckoned from
-- the holder's lease; Java clients never read it.

local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A fair lock's queue as a script sees it: its keys, the time, how long a distlock waiter
-- counts as alive after its last poll (`lease`, ms) and after how long without a poll one
-- that nobody hears on its channel counts as gone (`quiet`, ms).
local function fair_queue(queue, deadlines, heard, lease, quiet)
  return {
    queue = queue, deadlines = deadlines, heard = heard, now = server_now(),
    lease = tonumber(lease), quiet = tonumber(quiet),
  }
end

local function drop_head(q, head)
  redis.call('LPOP', q.queue)
  redis.call('ZREM', q.deadlines, head)
  redis.call('ZREM', q.heard, head)
end

-- Drops the waiters at the head of the queue that are gone (past their deadline, or a
-- distlock waiter that has not polled within its lease); answers the head left, if any.
local function live_head(q)
  while true do
    local head = redis.call('LINDEX', q.queue, 0)
    if not head then
      return nil
    end
    local deadline = tonumber(redis.call('ZSCORE', q.deadlines, head))
    local polled = tonumber(redis.call('ZSCORE', q.heard, head))
    if deadline and deadline > q.now and (not polled or polled + q.lease > q.now) then
      return head
    end
    drop_head(q, head)
  end
end

-- Tells the waiter at the head of the queue, on its own channel, that the lock is free.
-- A distlock waiter queues only once it listens there, so one that nobody hears and that
-- is overdue for a poll has lost its connection (its process died, most likely): it leaves
-- the queue and the next head is told. Java's waiters are left to their deadlines. Nobody
-- is told once the head is `asking` (the waiter whose script this is, if any).
local function wake_head(q, channel, asking)
  local head = live_head(q)
  while head and head ~= asking do
    local heard_by = redis.call('PUBLISH', channel .. ':' .. head, '0')
    local polled = tonumber(redis.call('ZSCORE', q.heard, head))
    if heard_by > 0 or not polled or polled + q.quiet > q.now then
      return
    end
    drop_head(q, head)
    head = live_head(q)
  end
end

-- The waiters in the queue, and where `field` stands among them (nil: not queued).
local function place_of(q, field)
  local waiters = redis.call('LRANGE', q.queue, 0, -1)
  for place, waiter in ipairs(waiters) do
    if waiter == field then
      return waiters, place
    end
  end
  return waiters, nil
end
