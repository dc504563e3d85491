-- Delete our grant, then wake the head waiter.  ARGV[1] token.
-- Returns 1 if released, 0 if the grant was no longer ours.
local released = delete_grant(ARGV[1])
wake_head()
return released
