-- The release fast path, a script of its own: our exclusive grant, which nobody waited for.
-- KEYS: LOCK. ARGV[1]: how our holder record starts while nobody waited for it,
-- `{"t":"<token>","k"` (a waiter that queues marks the record, see `waited_for`).
-- Returns 1 if released, -1 where the fast path does not apply (the client then runs the
-- full script, which passes the lock on, and also tells a grant that is gone).
local held = redis.call('GET', KEYS[1])
if held and string.sub(held, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return -1
