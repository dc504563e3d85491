-- The release fast path, a script of its own: our exclusive grant, with nobody queued
-- behind it. KEYS: LOCK, QUEUE. ARGV[1]: how our holder record starts, `{"t":"<token>"`.
-- Returns 1 if released, -1 where the fast path does not apply (the client then runs the
-- full script, which also tells a grant that is gone).
local held = redis.call('GET', KEYS[1])
if held and string.sub(held, 1, #ARGV[1]) == ARGV[1] and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
return -1
