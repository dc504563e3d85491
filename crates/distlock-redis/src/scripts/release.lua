-- The general path: a shared grant, or waiters to wake.
if released == 0 then
  released = delete_grant(ARGV[1])
end
wake_head()
return released
