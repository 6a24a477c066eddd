"""The Lua scripts every Redis write goes through: state, sequence and changelog in one step.

Keys (one hash tag, so a cluster keeps them on one slot): entries, groups, seq, epoch, stream,
and last the content digest (app/banlist/digest.py), which each script keeps equal to what
the entries and groups hold, in the same step: `seq:hex`, the XOR of one hash per entry and
per group as of that seq. A Redis written before the digest existed holds none, and a
writer that does not keep it leaves it at an old seq; the scripts carry only a digest at
the current seq (none can be updated without a starting value) until a replica computes it
again from Redis's own content (Replicator._init_digest).
"""
from __future__ import annotations

# The id every record a script writes is stamped with: one millisecond for the changelog and
# the history alike. `*` reads the clock at each XADD, so a script that crossed a millisecond
# gave a change's two records two times, and its `at` differed between GET /changes and the
# history's filters. `ms-*` numbers the records within the millisecond. Never before either
# stream's last id (XADD refuses one: a Redis whose clock is behind the one that wrote them,
# after a failover), as `*` would not be either.
STAMP = r"""
local function ms_of(t)  -- a TIME reply in milliseconds
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function stamp(now_ms, streams)
  local ms = now_ms
  for _, key in ipairs(streams) do
    local info = redis.pcall('XINFO', 'STREAM', key)
    if type(info) == 'table' and not info.err then  -- an error: no such stream yet
      for j = 1, #info - 1, 2 do
        if info[j] == 'last-generated-id' then
          ms = math.max(ms, tonumber(string.match(info[j + 1], '^(%d+)')))
        end
      end
    end
  end
  return string.format('%.0f', ms) .. '-*'
end
"""

# The digest's helpers, shared by the scripts: `toggle` XORs a SHA-1 (its first 128 bits, as
# digest.py hashes) into the digest held in `digest`, a table {value = hex or false}.
DIGEST = r"""
local function xor_hex(d, h)
  local out = {}
  for k = 0, 3 do
    local a = tonumber(string.sub(d, k * 8 + 1, k * 8 + 8), 16)
    local b = tonumber(string.sub(h, k * 8 + 1, k * 8 + 8), 16)
    out[k + 1] = bit.tohex(bit.bxor(a, b), 8)
  end
  return table.concat(out)
end
local function entry_hash(id, payload)
  return redis.sha1hex('e\n' .. id .. '\n' .. payload)
end
-- in byte order, as Python and Rust sort: Lua compares strings with strcoll, and Redis
-- sets LC_COLLATE from its environment, where en_US puts example-shop.com after example.com
local function bytewise(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local function group_hash(name, payload)
  local domains = cjson.decode(payload)
  table.sort(domains, bytewise)
  local text = 'g\n' .. name .. '\n'
  for _, d in ipairs(domains) do text = text .. d .. '\n' end
  return redis.sha1hex(text)
end
local function toggle(digest, h)
  if digest.value then digest.value = xor_hex(digest.value, h) end
end
"""

# A batch of changes, all or nothing. KEYS: entries, groups, seq, epoch, stream, this
# write's outcome key, the digest, the history stream. ARGV: expected epoch ('' = this
# writer holds no list yet, '!fresh' = a seed, refused once any banlist exists), retention
# ms, outcome TTL s, attempt id, the stream id of the last change the writer's copy held
# when it decided which adds are new ('' = the write does not depend on the list; else the
# script refuses with REARRANGE_CONFLICT when a change since then added one of the same
# bans, defined a group this write defines, or replaced the list, so two replicas cannot
# both add it), the history's retention ms, then six per change: op, key, payload, actor,
# reason, and a sixth that depends on the op: for an add, the group that must exist (held in
# Redis, or defined by a `group` change of this write); for an edit, the entry's payload the
# edit was decided on (refused with REARRANGE_CONFLICT when Redis holds another,
# REARRANGE_NOTFOUND when none); for an expire, the expiry the sweeper saw (an entry edited
# since is not expired). Returns {epoch, seq of each change (0 when an expiry found the
# entry already gone, or edited)}. A remove or expire logs the entry it deletes as its
# payload: the history says what was lifted after the add has left the stream; an edit logs
# the new payload and, as `previous`, the one it replaced. Each change goes to the changelog
# (replication: kept for the retention, a day by default) and, the same record, to the
# history stream, kept for REARRANGE_BANLIST_HISTORY_DAYS: what `history` and lookup's
# former entries read.
#
# KEYS[9] is the bulk removal under way (app/banlist/redis/batch.py): while it exists the
# script refuses with REARRANGE_BUSY (a re-sent write that committed still gets its result),
# so that a batch's seqs are consecutive. A writer that gives only the eight keys (one of
# an older release) neither waits for a batch nor indexes ends.
#
# The index of ends (app/banlist/redis/ends.py), when the writer gives it: KEYS[10] is the
# index's start mark (set to the first indexed end's time, once), then one key per `remove`
# or `expire` change, in the order of those changes (KEYS[11] for the first, and so on; an
# expiry that finds the entry gone uses none of its key): the sorted set of the ended
# entry's registrable domain or org group, to which the end's history record id is added,
# scored by its time in ms. Each set written is trimmed to the history's window and expires
# with it, so an idle domain's set goes away.
#
# All or nothing: every refusal is checked before the first write (Redis does not undo a
# script's writes when it returns an error), and the `#!lua` shebang makes Redis refuse the
# script up front when it is out of memory instead of failing a write halfway through.
# The outcome key makes the write idempotent and answerable: a re-sent write returns the
# first one's result, and a writer that lost the answer either finds the result there or
# fences the write off for good by setting 'aborted:…' first (outcomes.settle, and
# outcomes.state for GET /v1/banlist/writes/{id}): any fence refuses the script forever.
WRITE = r"""#!lua
""" + DIGEST + STAMP + r"""
local done = redis.call('GET', KEYS[6])
if done then
  if string.sub(done, 1, 8) == 'aborted:' then  -- fenced by its writer or by a status query
    return redis.error_reply('REARRANGE_ABORTED this write was given up on before it ran')
  else
    local r = cjson.decode(done)
    local out = {r.epoch}
    if r.seqs then
      for _, seq in ipairs(r.seqs) do table.insert(out, seq) end
    else
      for seq = r.first, r.last do table.insert(out, seq) end
    end
    return out
  end
end
if KEYS[9] and redis.call('EXISTS', KEYS[9]) == 1 then
  return redis.error_reply('REARRANGE_BUSY a bulk removal is under way')
end
local epoch = redis.call('GET', KEYS[4])
local expected = ARGV[1]
if expected == '!fresh' then  -- a seed: only into a Redis that holds no banlist yet
  if epoch then
    return redis.error_reply('REARRANGE_SEEDED another replica seeded Redis first')
  end
  expected = ''
end
local t = redis.call('TIME')
local now_ms = ms_of(t)
if not epoch then
  if expected ~= '' then
    return redis.error_reply('REARRANGE_EMPTY Redis holds no banlist but this replica ' ..
      'holds epoch ' .. expected .. ' (Redis restarted empty or was flushed): ' ..
      'run `rearrange banlist reseed` from a replica with a good copy')
  end
elseif expected ~= '' and epoch ~= expected then
  return redis.error_reply('REARRANGE_EPOCH Redis holds banlist epoch ' .. epoch ..
    ', this replica epoch ' .. expected .. ': refusing to write into another history')
end
local defining = {}  -- groups this write defines (an import's), before the adds naming them
for i = 7, #ARGV, 6 do
  if ARGV[i] == 'group' then defining[ARGV[i + 1]] = true end
end
if ARGV[5] ~= '' then  -- adds decided on the copy up to stream record ARGV[5]
  local function ident(p)
    return p.scope .. '\n' .. p.value .. '\n' .. table.concat(p.regions or {}, ',')
  end
  local want = {}
  for i = 7, #ARGV, 6 do
    if ARGV[i] == 'add' or ARGV[i] == 'edit' then
      want[ident(cjson.decode(ARGV[i + 2]))] = true
    end
  end
  for _, rec in ipairs(redis.call('XRANGE', KEYS[5], '(' .. ARGV[5], '+')) do
    local f, op, key, payload = rec[2], nil, nil, nil
    for j = 1, #f, 2 do
      if f[j] == 'op' then op = f[j + 1] elseif f[j] == 'key' then key = f[j + 1]
      elseif f[j] == 'payload' then payload = f[j + 1] end
    end
    if op == 'seed' or op == 'reseed' or (op == 'group' and defining[key])
        or ((op == 'add' or op == 'edit') and want[ident(cjson.decode(payload))]) then
      return redis.error_reply('REARRANGE_CONFLICT an identical ban, a group this write ' ..
        'defines (or a whole new list) was committed since this write was decided on')
    end
  end
end
for i = 7, #ARGV, 6 do
  local op, key, group = ARGV[i], ARGV[i + 1], ARGV[i + 5]
  if op == 'add' and group ~= '' and not defining[group]
      and redis.call('HEXISTS', KEYS[2], group) == 0 then
    return redis.error_reply('REARRANGE_NOGROUP no org group named ' .. group)
  elseif op == 'remove' and redis.call('HEXISTS', KEYS[1], key) == 0 then
    return redis.error_reply('REARRANGE_NOTFOUND no active entry ' .. key)
  elseif op == 'edit' then
    local held = redis.call('HGET', KEYS[1], key)
    if not held then
      return redis.error_reply('REARRANGE_NOTFOUND no active entry ' .. key)
    elseif held ~= ARGV[i + 5] then
      return redis.error_reply('REARRANGE_CONFLICT entry ' .. key .. ' changed since ' ..
        'this edit was decided on')
    end
  end
end
-- the digest is kept as `seq:hex`, the seq it is the digest at: one that is not at the
-- current seq was left behind by a writer that does not keep it (an older release, a
-- hand edit) and is not carried on; a new list starts at the empty digest
local digest = {value = false}
local held_digest = redis.call('GET', KEYS[7])
if held_digest then
  local at, hex = string.match(held_digest, '^(%d+):(%x+)$')
  if at and at == (redis.call('GET', KEYS[3]) or '0') then digest.value = hex end
end
if not epoch then
  epoch = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
  redis.call('SET', KEYS[4], epoch)
  digest.value = string.rep('0', 32)
end
local minid = tostring(math.max(0, now_ms - tonumber(ARGV[2])))
local history_minid = tostring(math.max(0, now_ms - tonumber(ARGV[6])))
local id = stamp(now_ms, {KEYS[5], KEYS[8]})
local out = {epoch}
local first, last, seqs = nil, 0, {}
local ends = 0  -- remove and expire changes met so far: KEYS[11 + ends] is the next one's set
for i = 7, #ARGV, 6 do
  local op, key, payload, actor, reason =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local seq = 0
  if op == 'add' then
    seq = redis.call('INCR', KEYS[3])
    key = tostring(seq)
    redis.call('HSET', KEYS[1], key, payload)
    toggle(digest, entry_hash(key, payload))
  elseif op == 'group' then
    seq = redis.call('INCR', KEYS[3])
    local before = redis.call('HGET', KEYS[2], key)
    if before then toggle(digest, group_hash(key, before)) end
    redis.call('HSET', KEYS[2], key, payload)
    toggle(digest, group_hash(key, payload))
  elseif op == 'edit' then
    seq = redis.call('INCR', KEYS[3])
    redis.call('HSET', KEYS[1], key, payload)
    toggle(digest, entry_hash(key, ARGV[i + 5]))
    toggle(digest, entry_hash(key, payload))
  else
    local old = redis.call('HGET', KEYS[1], key)
    if old and op == 'expire' and ARGV[i + 5] ~= ''
        and cjson.decode(old).expires_at ~= ARGV[i + 5] then
      old = nil  -- edited since the sweeper saw it expire: extended, or made permanent
    end
    if old then
      redis.call('HDEL', KEYS[1], key)
      seq = redis.call('INCR', KEYS[3])
      payload = old
      toggle(digest, entry_hash(key, old))
    end
  end
  if seq ~= 0 then
    local also = {}
    if op == 'edit' then also = {'previous', ARGV[i + 5]} end
    redis.call('XADD', KEYS[5], 'MINID', '~', minid, id, 'seq', seq, 'epoch', epoch,
      'op', op, 'key', key, 'payload', payload, 'actor', actor, 'reason', reason, unpack(also))
    local hid = redis.call('XADD', KEYS[8], 'MINID', '~', history_minid, id, 'seq', seq,
      'epoch', epoch, 'op', op, 'key', key, 'payload', payload, 'actor', actor,
      'reason', reason, unpack(also))
    if (op == 'remove' or op == 'expire') and KEYS[11 + ends] then
      local ms, set = string.match(hid, '^(%d+)'), KEYS[11 + ends]
      redis.call('SET', KEYS[10], ms, 'NX')
      redis.call('ZADD', set, ms, hid)
      redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. history_minid)
      redis.call('PEXPIRE', set, ARGV[6])
    end
    first, last = first or seq, seq
  end
  if op == 'remove' or op == 'expire' then ends = ends + 1 end
  table.insert(out, seq)
  table.insert(seqs, seq)
end
if digest.value then
  redis.call('SET', KEYS[7], (redis.call('GET', KEYS[3]) or '0') .. ':' .. digest.value)
end
-- what a re-sent write answers: the range when every change took a seq, else each seq
local outcome = {epoch = epoch, first = first, last = last}
if not first or last - first + 1 ~= #seqs then outcome = {epoch = epoch, seqs = seqs} end
redis.call('SET', KEYS[6], cjson.encode(outcome), 'EX', ARGV[3])
return out
"""

# A history stream for a Redis written before there was one: the changelog's records copied
# into it, once (none when it exists). KEYS: the changelog, the history. Returns how many.
HISTORY = r"""
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local n, start = 0, '-'
while true do
  local page = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 1000)
  for _, rec in ipairs(page) do
    redis.call('XADD', KEYS[2], rec[1], unpack(rec[2]))
    n = n + 1
  end
  if #page < 1000 then return n end
  start = '(' .. page[#page][1]
end
"""

# Put a replica's copy back (after Redis lost it). The entries and groups were written to
# the staging keys KEYS[6], KEYS[7]; this swaps them in, unless Redis moved on meanwhile.
# ARGV: epoch, seq of the copy, what Redis held when the reseed was checked (epoch, seq),
# actor, reason, the stream id of the copy's last change, the copy's digest (KEYS[8]); its
# record goes to the history stream (KEYS[9]) too, which a reseed does not rewrite. A bulk
# removal under way (KEYS[10] to KEYS[12], batch.py) is dropped: the copy replaces it. The
# reseed is itself a change, so
# every replica notices it: numbered past both the copy and Redis's own seq in that epoch
# (a replica that followed changes written after a rewind must not see Redis go backwards),
# and naming its `base`: a replica whose last change is that one holds the copy already.
RESEED = r"""
if redis.replicate_commands then pcall(redis.replicate_commands) end
""" + STAMP + r"""
local cur_epoch = redis.call('GET', KEYS[4]) or ''
local cur_seq = redis.call('GET', KEYS[3]) or '0'
if cur_epoch ~= ARGV[3] or cur_seq ~= ARGV[4] then
  return redis.error_reply('REARRANGE_MOVED Redis changed while the copy was written ' ..
    '(now epoch ' .. cur_epoch .. ' seq ' .. cur_seq .. '): check again')
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[5], KEYS[10], KEYS[11], KEYS[12])
if redis.call('EXISTS', KEYS[6]) == 1 then redis.call('RENAME', KEYS[6], KEYS[1]) end
if redis.call('EXISTS', KEYS[7]) == 1 then redis.call('RENAME', KEYS[7], KEYS[2]) end
local seq = tonumber(ARGV[2])
if cur_epoch == ARGV[1] then seq = math.max(seq, tonumber(cur_seq)) end
seq = seq + 1
redis.call('SET', KEYS[3], seq)
redis.call('SET', KEYS[4], ARGV[1])
redis.call('SET', KEYS[8], seq .. ':' .. ARGV[8])
local t = redis.call('TIME')
local id = stamp(ms_of(t), {KEYS[9]})
redis.call('XADD', KEYS[5], id, 'seq', seq, 'epoch', ARGV[1], 'op', 'reseed',
  'key', '', 'payload', '', 'actor', ARGV[5], 'reason', ARGV[6], 'base', ARGV[7])
redis.call('XADD', KEYS[9], id, 'seq', seq, 'epoch', ARGV[1], 'op', 'reseed', 'key', '',
  'payload', '', 'actor', ARGV[5], 'reason', ARGV[6], 'base', ARGV[7])
return seq
"""

# Seed an empty Redis with a list too large for one write script (a first start's seed file).
# The entries (ids 1..count) were written to the staging hash KEYS[6] meanwhile, invisible,
# and the org groups they name to KEYS[7]; this swaps them in and logs one `seed` change at
# seq count + 1, which every replica meets as a new epoch and answers with a full resync.
# ARGV: count, actor, reason, the staged content's digest (KEYS[8]); KEYS[9]: the history.
SEED = r"""#!lua
""" + STAMP + r"""
if redis.call('EXISTS', KEYS[4]) == 1 or redis.call('EXISTS', KEYS[3]) == 1 then
  return redis.error_reply('REARRANGE_NOTEMPTY Redis holds a banlist already: not seeded')
end
local staged = redis.call('HLEN', KEYS[6])
if staged ~= tonumber(ARGV[1]) then
  return redis.error_reply('REARRANGE_STAGE the staged seed holds ' .. staged ..
    ' entries, not ' .. ARGV[1] .. ' (it expired or was written twice): not seeded')
end
local t = redis.call('TIME')
local epoch = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
redis.call('DEL', KEYS[1], KEYS[2], KEYS[5])
redis.call('RENAME', KEYS[6], KEYS[1])
redis.call('PERSIST', KEYS[1])
if redis.call('EXISTS', KEYS[7]) == 1 then
  redis.call('RENAME', KEYS[7], KEYS[2])
  redis.call('PERSIST', KEYS[2])
end
local seq = staged + 1
redis.call('SET', KEYS[3], seq)
redis.call('SET', KEYS[4], epoch)
redis.call('SET', KEYS[8], seq .. ':' .. ARGV[4])
local id = stamp(ms_of(t), {KEYS[9]})
redis.call('XADD', KEYS[5], id, 'seq', seq, 'epoch', epoch, 'op', 'seed',
  'key', ARGV[1], 'payload', '', 'actor', ARGV[2], 'reason', ARGV[3])
redis.call('XADD', KEYS[9], id, 'seq', seq, 'epoch', epoch, 'op', 'seed', 'key', ARGV[1],
  'payload', '', 'actor', ARGV[2], 'reason', ARGV[3])
return {epoch, seq}
"""
