-- The general path: a shared grant, or waiters to wake.
local released = delete_grant(ARGV[1])
wake_head()
return released
