"""The Lua scripts every Redis write goes through: state, sequence and changelog in one step.

Keys (one hash tag, so a cluster keeps them on one slot): entries, groups, seq, epoch, stream.
"""
from __future__ import annotations

# A batch of changes. ARGV: expected epoch ('' = this writer holds no list yet), retention ms,
# then six per change: op, key, payload, actor, reason, group-that-must-exist.
# Returns {epoch, seq of each change (0 when an expiry found the entry already gone)}.
WRITE = r"""
if redis.replicate_commands then pcall(redis.replicate_commands) end
local epoch = redis.call('GET', KEYS[4])
local expected = ARGV[1]
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not epoch then
  if expected ~= '' then
    return redis.error_reply('REARRANGE_EMPTY Redis holds no banlist but this replica ' ..
      'holds epoch ' .. expected .. ' (Redis restarted empty or was flushed): ' ..
      'run `rearrange banlist reseed` from a replica with a good copy')
  end
  epoch = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
  redis.call('SET', KEYS[4], epoch)
elseif expected ~= '' and epoch ~= expected then
  return redis.error_reply('REARRANGE_EPOCH Redis holds banlist epoch ' .. epoch ..
    ', this replica epoch ' .. expected .. ': refusing to write into another history')
end
local minid = tostring(math.max(0, now_ms - tonumber(ARGV[2])))
local out = {epoch}
local i = 3
while i <= #ARGV do
  local op, key, payload, actor, reason, group =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  i = i + 6
  local seq = 0
  if op == 'add' then
    if group ~= '' and redis.call('HEXISTS', KEYS[2], group) == 0 then
      return redis.error_reply('REARRANGE_NOGROUP no org group named ' .. group)
    end
    seq = redis.call('INCR', KEYS[3])
    key = tostring(seq)
    redis.call('HSET', KEYS[1], key, payload)
  elseif op == 'group' then
    seq = redis.call('INCR', KEYS[3])
    redis.call('HSET', KEYS[2], key, payload)
  elseif redis.call('HDEL', KEYS[1], key) == 1 then
    seq = redis.call('INCR', KEYS[3])
  elseif op == 'remove' then
    return redis.error_reply('REARRANGE_NOTFOUND no active entry ' .. key)
  end
  if seq ~= 0 then
    redis.call('XADD', KEYS[5], 'MINID', '~', minid, '*', 'seq', seq, 'epoch', epoch,
      'op', op, 'key', key, 'payload', payload, 'actor', actor, 'reason', reason)
  end
  table.insert(out, seq)
end
return out
"""

# Put a replica's copy back (after Redis lost it). The entries and groups were written to
# the staging keys KEYS[6], KEYS[7]; this swaps them in, unless Redis moved on meanwhile.
# ARGV: epoch, seq of the copy, what Redis held when the reseed was checked (epoch, seq),
# actor, reason. The reseed is itself a change (seq + 1) so every replica notices it.
RESEED = r"""
if redis.replicate_commands then pcall(redis.replicate_commands) end
local cur_epoch = redis.call('GET', KEYS[4]) or ''
local cur_seq = redis.call('GET', KEYS[3]) or '0'
if cur_epoch ~= ARGV[3] or cur_seq ~= ARGV[4] then
  return redis.error_reply('REARRANGE_MOVED Redis changed while the copy was written ' ..
    '(now epoch ' .. cur_epoch .. ' seq ' .. cur_seq .. '): check again')
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[5])
if redis.call('EXISTS', KEYS[6]) == 1 then redis.call('RENAME', KEYS[6], KEYS[1]) end
if redis.call('EXISTS', KEYS[7]) == 1 then redis.call('RENAME', KEYS[7], KEYS[2]) end
local seq = tonumber(ARGV[2]) + 1
redis.call('SET', KEYS[3], seq)
redis.call('SET', KEYS[4], ARGV[1])
redis.call('XADD', KEYS[5], '*', 'seq', seq, 'epoch', ARGV[1], 'op', 'reseed', 'key', '',
  'payload', '', 'actor', ARGV[5], 'reason', ARGV[6])
return seq
"""
