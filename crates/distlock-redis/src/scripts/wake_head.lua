-- Wake the first live waiter of the queue: publish its token on its client's channel.
local function wake_head(queue, waiters)
  local queued = redis.call('ZRANGE', queue, 0, -1)
  if #queued == 0 then
    return
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for _, other in ipairs(queued) do
    local raw = redis.call('HGET', waiters, other)
    local info = raw and cjson.decode(raw)
    if info and tonumber(info.e) > now then
      redis.call('PUBLISH', info.c, other)
      return
    end
    redis.call('ZREM', queue, other)
    redis.call('HDEL', waiters, other)
  end
end
