-- KEYS: stream, dead-letter stream. ARGV: group, consumer, min idle ms, max deliveries, count
local group, consumer, idle, max, count = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local dead = 0
for _, p in ipairs(redis.call('XPENDING', KEYS[1], group, 'IDLE', idle, '-', '+', count)) do
  if p[4] >= max then  -- delivered too often: move it to the dead-letter stream
    local e = redis.call('XRANGE', KEYS[1], p[1], p[1])[1]
    if e then redis.call('XADD', KEYS[2], '*', 'source-id', p[1], 'deliveries', p[4], unpack(e[2])) end
    redis.call('XACK', KEYS[1], group, p[1]); dead = dead + 1
  end
end
return {dead, redis.call('XAUTOCLAIM', KEYS[1], group, consumer, idle, '0-0', 'COUNT', count)[2]}
