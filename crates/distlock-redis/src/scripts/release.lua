-- Delete our grant, exclusive or shared, then pass the lock on (see `hand_on`).
-- ARGV[1] token, ARGV[2] fence_ttl_ms.
-- Returns 1 if released, 0 if the grant was no longer ours. The client releases an
-- exclusive grant with release_fast.lua first, so this runs when that does not apply.
local held = redis.call('GET', LOCK)
local released = delete_grant(ARGV[1])
hand_on(released == 1 and held, ARGV[2])
return released
