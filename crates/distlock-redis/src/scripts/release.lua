-- Delete our grant, exclusive or shared, then pass the lock on (see `hand_on`).
-- ARGV[1] token, ARGV[2] fence_ttl_ms; for a RedLock master ARGV[3] says why:
-- 'release' (the holder lets go; it also leaves the queue, where this master answered
-- its try only after the majority had granted it) or 'give-back' (a grant its try won on
-- too few masters: the lock is left free, not handed on, so a grant that did not stand is
-- not passed down the queue from waiter to waiter; nor is anyone woken, as the others'
-- tries would split the same way while a holder keeps the rest).
-- Returns 1 if released, 0 if the grant was no longer ours. The client releases an
-- exclusive grant with release_fast.lua first, so this runs when that does not apply.
local held = redis.call('GET', LOCK)
local released = delete_grant(ARGV[1])
if ARGV[3] == 'give-back' then return released end
if ARGV[3] == 'release' then leave_queue(ARGV[1]) end
hand_on(released == 1 and held, ARGV[2])
return released
