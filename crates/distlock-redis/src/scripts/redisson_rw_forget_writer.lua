-- A distlock writer stops waiting. KEYS: distlock's waiting writers, the lock, its release
-- channel. ARGV: the writer's request token. Its record leaves the waiting writers; when
-- it was the last and the lock is free or read, distlock's readers that waited behind it
-- are told (`0`, as after a reader's release), so they need not wait out their sleep.
local writers, lock, channel = KEYS[1], KEYS[2], KEYS[3]
if redis.call('ZREM', writers, ARGV[1]) == 1 and redis.call('ZCARD', writers) == 0
    and redis.call('HGET', lock, 'mode') ~= 'write' then
  redis.call('PUBLISH', channel, '0')
end
return 0
