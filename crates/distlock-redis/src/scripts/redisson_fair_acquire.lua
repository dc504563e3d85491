-- Runs as the function `try_grant` of redisson_granted.lua, which takes the last two KEYS
-- and the last ARGV (the waiter's record for `status`, dropped on a grant).
-- A fair grant in Redisson's layout: the lock as in its fenced lock, granted only to the
-- waiter at the head of Redisson's queue. KEYS: the lock, its counter of grants, the
-- queue, its deadlines, when distlock's waiters last polled. ARGV: the lease (ms), the
-- holder's field, the field of distlock's record of the holder (in the lock's hash), the
-- request's record (JSON; the grant's token is appended as `f`), how long a waiter may
-- take to claim its turn (ms, Redisson's fairLockWaitTimeout), 1 to queue when not
-- granted (0: a try), how long a distlock waiter counts as alive after a poll (ms), after
-- how long without a poll one nobody hears counts as gone (ms), the channel prefix
-- waiters are woken on.
-- Answers {1, token} when granted, {0, ms} while queued (ms: how long the wait ahead is
-- expected to last), {0, -1} while a hash without a TTL stands there, {-1, 0} when the key
-- is not a lock hash, {-2, 0} when it is a read-write lock's.
local lock, counter = KEYS[1], KEYS[2]
local lease, field, record_field, record = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local turn, queues, channel = tonumber(ARGV[5]), ARGV[6] == '1', ARGV[9]
local q = fair_queue(KEYS[3], KEYS[4], KEYS[5], ARGV[7], ARGV[8])
local now = q.now
local head = live_head(q)
local left = redis.call('PTTL', lock)
if left == -2 and head and head ~= field then
  -- Free, with a waiter ahead that may not have heard: tell it again (a distlock waiter
  -- gone quiet that nobody hears leaves the queue).
  wake_head(q, channel, field)
  head = redis.call('LINDEX', q.queue, 0)
end
if left == -2 and (not head or head == field) then
  if head then
    drop_head(q, field)
    -- Every waiter behind moved up one turn: its deadline comes a turn sooner.
    for _, waiter in ipairs(redis.call('ZRANGE', q.deadlines, 0, -1)) do
      redis.call('ZINCRBY', q.deadlines, -turn, waiter)
    end
  end
  return {1, grant(lock, counter, lease, field, record_field, record)}
end
local answer = left ~= -2 and standing(lock, counter, lease, field, left)
if answer then
  return answer
end
if not queues then
  return {0, math.max(left, 1)}
end
-- Queued, or queued now at the tail. The deadline follows the waiter ahead's as
-- Redisson's does (its deadline and a turn more; at the head, the holder's lease left and
-- a turn), never sooner than a turn from now, and is set again at every poll, so it never
-- passes while this waiter lives.
local waiters, place = place_of(q, field)
local ahead
if place then
  ahead = waiters[place - 1]
else
  ahead = waiters[#waiters]
  redis.call('RPUSH', q.queue, field)
end
local ahead_deadline = ahead and tonumber(redis.call('ZSCORE', q.deadlines, ahead)) or 0
local deadline = math.max(ahead_deadline, now + math.max(left, 0)) + turn
redis.call('ZADD', q.deadlines, deadline, field)
redis.call('ZADD', q.heard, now, field)
-- The record of polls outlives every deadline in it.
local keep = deadline - now + q.lease
if redis.call('PTTL', q.heard) < keep then
  redis.call('PEXPIRE', q.heard, keep)
end
if left == -1 then
  return {0, -1}
end
return {0, math.max(deadline - turn - now, 1)}
