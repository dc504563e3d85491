-- Read a lock's note.  KEYS[1] the note.  Returns nil if there is none, else
-- {value, fencing token, time of the write (ms), quiet ms left (0: none)}, times on the
-- server's clock. Large numbers travel as text.
local note = redis.call('HMGET', KEYS[1], 'v', 't', 'w', 'q')
if not note[1] then
  return nil
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = 0
if note[4] and note[4] ~= '' then
  left = math.max(0, tonumber(note[4]) - now)
end
return {note[1], note[2], note[3], string.format('%.0f', left)}
