-- Helpers of Redisson's fair-lock queue, put before the scripts that use it. The queue
-- is a list of waiters' fields; beside it a sorted set of each waiter's deadline (ms): a
-- Java waiter not granted by its deadline is taken for gone. distlock's waiters also keep
-- a sorted set of when they were last heard from (ms, refreshed by every poll), so one
-- whose process died leaves the queue within that lease, not at a deadline set by the
-- holder's lease; Java clients never read it.

local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Drops the waiters at the head of the queue that are gone (past their deadline, or a
-- distlock waiter not heard from within its lease); answers the head left, if any.
local function live_head(queue, deadlines, heard, now)
  while true do
    local head = redis.call('LINDEX', queue, 0)
    if not head then
      return nil
    end
    local deadline = tonumber(redis.call('ZSCORE', deadlines, head))
    local last_heard = tonumber(redis.call('ZSCORE', heard, head))
    if deadline and deadline > now and (not last_heard or last_heard > now) then
      return head
    end
    redis.call('LPOP', queue)
    redis.call('ZREM', deadlines, head)
    redis.call('ZREM', heard, head)
  end
end

-- Tells the waiter at the head of the queue, on its own channel, that the lock is free.
-- A distlock waiter queues only once it listens there, so one that nobody hears has lost
-- its connection (its process died, most likely): it leaves the queue and the next head
-- is told. Java's waiters are left to their deadlines. Nobody is told once the head is
-- `asking` (the waiter whose script this is, if any).
local function wake_head(channel, queue, deadlines, heard, now, asking)
  local head = live_head(queue, deadlines, heard, now)
  while head and head ~= asking do
    local heard_by = redis.call('PUBLISH', channel .. ':' .. head, '0')
    if heard_by > 0 or not redis.call('ZSCORE', heard, head) then
      return
    end
    redis.call('LPOP', queue)
    redis.call('ZREM', deadlines, head)
    redis.call('ZREM', heard, head)
    head = live_head(queue, deadlines, heard, now)
  end
end
