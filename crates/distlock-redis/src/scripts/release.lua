-- Delete our grant, exclusive or shared, then wake the head waiter.  ARGV[1] token.
-- Returns 1 if released, 0 if the grant was no longer ours. The client releases an
-- exclusive grant with release_fast.lua first, so this runs when that does not apply.
local released = delete_grant(ARGV[1])
wake_head()
return released
