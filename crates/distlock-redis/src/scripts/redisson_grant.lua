-- Helpers of the Redisson-layout grants (plain and fair), put before their scripts.

-- Grants `lock` to holder `field` for `lease` ms: a count of one in Redisson's hash,
-- distlock's `record` of the holder (JSON; the grant's token appended as `f`) in
-- `record_field` beside it, one more grant counted in `counter`. Answers the token.
local function grant(lock, counter, lease, field, record_field, record)
  local token = redis.call('INCR', counter)
  redis.call('HSET', lock, field, 1, record_field,
    string.sub(record, 1, -2) .. ',"f":"' .. string.format('%.0f', token) .. '"}')
  redis.call('PEXPIRE', lock, lease)
  return token
end

-- What a try answers when `lock` stands (its PTTL `left`) and is not there to grant:
-- {-1, 0} when it is no lock hash (another layout's key), {-2, 0} when it is a
-- read-write lock's (it has a `mode`), {1, token} when it is this holder's own grant
-- asked for again (its answer was lost: the same token), else nil.
local function standing(lock, counter, lease, field, left)
  if redis.call('TYPE', lock).ok ~= 'hash' then
    return {-1, 0}
  end
  if redis.call('HEXISTS', lock, 'mode') == 1 then
    return {-2, 0}
  end
  if left > 0 and redis.call('HEXISTS', lock, field) == 1 then
    redis.call('PEXPIRE', lock, lease)
    return {1, tonumber(redis.call('GET', counter)) or 0}
  end
  return nil
end
