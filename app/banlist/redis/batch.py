"""A bulk removal on Redis: one batch, however many entries, written in chunks.

Each removal is a change of its own (its seq, its record in the changelog and the history,
with actor and reason), as a single removal's is. A million of them in one script would
hold Redis for a minute or more (docs/banlist.md, "Speed"), so they are committed CHUNK at
a time (a fraction of a second each), and made one batch otherwise:

- **staged, then opened**: the ids and the set of ends each goes to (`id TAB name`,
  ends.py) are pushed to a staging list of their own, invisible, then `OPEN` checks that
  nothing changed since the writer's copy decided what matches, takes the list as the
  batch's, and records the batch (`Keys.batch`: its id, epoch and seqs, actor and reason);
- **exclusive**: while a batch is open every other write script refuses with
  REARRANGE_BUSY (the writer waits for the batch, lua.WRITE), so its seqs are consecutive
  and the seq it ends at is known when it opens;
- **applied whole**: each record carries `txn`, the seq the batch ends at; a replica
  holds a batch's records until it has read the last (txn.py), so the version every
  replica serves moves once, from before the batch to after it;
- **finished by anyone**: `STEP` takes the chunk at the head of the batch's list. The
  writer holds a lease (`Keys.batch_lease`, LEASE_MS, renewed by each chunk); a batch whose
  writer died is finished by the next replica that finds the lease gone (its sweep, or a
  write that met the batch), from the list Redis holds. A batch once opened is thus
  finished, never half-applied for good; a reseed drops one under way.
"""
from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
import redis

from app.banlist.redis import lua
from app.banlist.redis.client import TextRedis
from app.banlist.redis.keys import Keys
from app.errors import BanlistConflict, BanlistUnavailable

log = logging.getLogger(__name__)
CHUNK = 5_000  # removals one STEP script commits: about 0.15 s of Redis (30 µs each)
LEASE_MS = 30_000  # a writer silent this long has died: another replica finishes its batch
STAGE_TTL = 3600  # seconds a staged list outlives a writer that died before opening it
WAIT_SECONDS = 10.0  # how long another write waits for a batch under way, then 503
POLL = 0.05  # seconds between looks at a batch under way

# KEYS: seq, epoch, stream, batch, batch list, lease, the staged list. ARGV: the epoch the
# writer holds, the stream id its copy decided on, the batch id, how many were staged,
# actor, reason, lease ms, the writer's lease token. Returns {first seq, last seq}.
OPEN = r"""#!lua
local epoch = redis.call('GET', KEYS[2])
if not epoch or epoch ~= ARGV[1] then
  return redis.error_reply('REARRANGE_EPOCH Redis holds banlist epoch ' .. tostring(epoch) ..
    ', this replica epoch ' .. ARGV[1] .. ': refusing to write into another history')
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  return redis.error_reply('REARRANGE_BUSY another bulk removal is under way')
end
if #redis.call('XRANGE', KEYS[3], '(' .. ARGV[2], '+', 'COUNT', 1) > 0 then
  return redis.error_reply('REARRANGE_CONFLICT the banlist changed since the removal ' ..
    'was decided on')
end
local count = tonumber(ARGV[4])
if redis.call('LLEN', KEYS[7]) ~= count then
  return redis.error_reply('REARRANGE_STAGE the staged removal holds ' ..
    redis.call('LLEN', KEYS[7]) .. ' entries, not ' .. count)
end
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
redis.call('RENAME', KEYS[7], KEYS[5])
redis.call('PERSIST', KEYS[5])
redis.call('SET', KEYS[4], cjson.encode({id = ARGV[3], epoch = epoch, first = seq + 1,
  last = seq + count, total = count, actor = ARGV[5], reason = ARGV[6]}))
redis.call('SET', KEYS[6], ARGV[8], 'PX', ARGV[7])
return {seq + 1, seq + count}
"""

# One chunk of an open batch: the head of its list. KEYS: entries, seq, stream, digest,
# history, batch, batch list, lease, ends-since, then the sets of ends (ends.py) the chunk's
# removals go to, each once. ARGV: the batch id, the lease token, lease ms, retention ms,
# history retention ms, how many items the chunk takes, its first and last item (`id TAB
# name`: the head the writer read, checked), then the name of each set of ends in KEYS'
# order. Each removal as lua.WRITE's `remove` (the entry it deletes as its payload, its
# history record indexed under its set of ends), each record with `txn` (the batch's last
# seq); the digest kept. The last chunk closes the batch. Returns {seq of the chunk's last
# removal, items left}.
STEP = r"""#!lua
""" + lua.STAMP + r"""
local held = redis.call('GET', KEYS[6])
if not held then
  return redis.error_reply('REARRANGE_NOBATCH no bulk removal is under way')
end
local batch = cjson.decode(held)
if batch.id ~= ARGV[1] then
  return redis.error_reply('REARRANGE_NOBATCH another bulk removal is under way')
end
if redis.call('GET', KEYS[8]) ~= ARGV[2] then
  return redis.error_reply('REARRANGE_LEASE another replica took this bulk removal over')
end
local n = tonumber(ARGV[6])
local head = redis.call('LRANGE', KEYS[7], 0, n - 1)
if #head ~= n or head[1] ~= ARGV[7] or head[n] ~= ARGV[8] then
  return redis.error_reply('REARRANGE_NOBATCH the batch moved on: read its head again')
end
local sets = {}  -- a set of ends' name -> its key
for j = 9, #ARGV do sets[ARGV[j]] = KEYS[j + 1] end
local t = redis.call('TIME')
local now_ms = ms_of(t)
local minid = tostring(math.max(0, now_ms - tonumber(ARGV[4])))
local history_minid = tostring(math.max(0, now_ms - tonumber(ARGV[5])))
local stamped = stamp(now_ms, {KEYS[3], KEYS[5]})
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
local words = false  -- the digest at the current seq, as four 32-bit words
local digest = redis.call('GET', KEYS[4])
if digest then
  local at, hex = string.match(digest, '^(%d+):(%x+)$')
  if at and tonumber(at) == seq then
    words = {}
    for w = 0, 3 do words[w + 1] = tonumber(string.sub(hex, w * 8 + 1, w * 8 + 8), 16) end
  end
end
local written = {}
for k = 1, n do
  local id, name = string.match(head[k], '^([^\t]*)\t(.*)$')
  local set = sets[name]
  if not set then
    return redis.error_reply('REARRANGE_NOBATCH no set of ends named for ' .. head[k])
  end
  local old = redis.call('HGET', KEYS[1], id)
  if old then  -- always, unless a writer that ignores batches removed it meanwhile
    redis.call('HDEL', KEYS[1], id)
    seq = seq + 1
    redis.call('XADD', KEYS[3], stamped, 'seq', seq, 'epoch', batch.epoch, 'op', 'remove',
      'key', id, 'payload', old, 'actor', batch.actor, 'reason', batch.reason,
      'txn', batch.last)
    local hid = redis.call('XADD', KEYS[5], stamped, 'seq', seq, 'epoch', batch.epoch,
      'op', 'remove', 'key', id, 'payload', old, 'actor', batch.actor,
      'reason', batch.reason, 'txn', batch.last)
    if words then
      local h = redis.sha1hex('e\n' .. id .. '\n' .. old)
      for w = 0, 3 do
        words[w + 1] = bit.bxor(words[w + 1], tonumber(string.sub(h, w * 8 + 1, w * 8 + 8), 16))
      end
    end
    local members = written[set]
    if not members then members = {}; written[set] = members end
    table.insert(members, string.match(hid, '^(%d+)'))
    table.insert(members, hid)
  end
end
-- trimmed once a chunk, not at each record (lua.WRITE's XADD MINID ~: the same bound)
redis.call('XTRIM', KEYS[3], 'MINID', '~', minid)
redis.call('XTRIM', KEYS[5], 'MINID', '~', history_minid)
redis.call('SET', KEYS[2], seq)
if words then
  local hex = {}
  for w = 1, 4 do hex[w] = bit.tohex(words[w], 8) end
  redis.call('SET', KEYS[4], seq .. ':' .. table.concat(hex))
end
if next(written) then
  redis.call('SET', KEYS[9], tostring(now_ms), 'NX')
  for set, members in pairs(written) do
    for m = 1, #members, 1000 do  -- score, member pairs: 500 a ZADD (Lua's stack)
      redis.call('ZADD', set, unpack(members, m, math.min(m + 999, #members)))
    end
    redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. history_minid)
    redis.call('PEXPIRE', set, ARGV[5])
  end
end
redis.call('LTRIM', KEYS[7], n, -1)
local left = redis.call('LLEN', KEYS[7])
if left == 0 then
  redis.call('DEL', KEYS[6], KEYS[7], KEYS[8])
else
  redis.call('SET', KEYS[8], ARGV[2], 'PX', ARGV[3])
end
return {seq, left}
"""


@dataclass(frozen=True, slots=True)
class Opened:
    """A batch this process writes: its id, its lease token and the seqs it takes."""

    id: str
    token: str
    first: int
    last: int


class Batches:
    """The bulk removals of one banlist in Redis: staging, opening, the chunks, and the
    wait of other writes for one under way."""

    def __init__(self, client: TextRedis, keys: Keys, retention_ms: int,
                 history_ms: int) -> None:
        self.client, self.keys = client, keys
        self.retention_ms, self.history_ms = retention_ms, history_ms
        self._open = client.register_script(OPEN)
        self._step = client.register_script(STEP)

    def stage(self, items: Iterable[str]) -> tuple[str, int]:
        """Push `id TAB name` items to a staging list of their own (invisible until opened,
        gone after STAGE_TTL if never opened); its key and how many were pushed."""
        stage, count, chunk = self.keys.batch_stage(), 0, []
        for item in items:
            chunk.append(item)
            if len(chunk) == CHUNK:
                count += self._push(stage, chunk)
                chunk = []
        if chunk:
            count += self._push(stage, chunk)
        return stage, count

    def _push(self, stage: str, items: list[str]) -> int:
        pipe = self.client.pipeline(transaction=False)
        pipe.rpush(stage, *items)
        pipe.expire(stage, STAGE_TTL)
        pipe.execute()
        return len(items)

    def open(self, stage: str, count: int, epoch: int, decided_on: str, actor: str,
             reason: str) -> Opened:
        """Open a batch of the staged list (refused, the stage dropped, with
        REARRANGE_CONFLICT when the list changed since `decided_on`, REARRANGE_BUSY when
        another batch is under way)."""
        batch, token = uuid.uuid4().hex, uuid.uuid4().hex
        try:
            first, last = self._open(
                keys=[self.keys.seq, self.keys.epoch, self.keys.stream, self.keys.batch,
                      self.keys.batch_list, self.keys.batch_lease, stage],
                args=[epoch, decided_on, batch, count, actor, reason, LEASE_MS, token])
        except redis.RedisError:
            self.client.delete(stage)
            raise
        return Opened(batch, token, int(first), int(last))

    def run(self, batch: str, token: str) -> int:
        """Commit the chunks of batch `batch` from the head of its list until none is
        left; the seq of the last removal. BanlistConflict (field `lease`) when another
        replica took the batch over (this writer was silent past the lease)."""
        seq = 0
        while True:
            items = self.client.lrange(self.keys.batch_list, 0, CHUNK - 1)
            if not items:
                return seq
            names = list(dict.fromkeys(item.partition("\t")[2] for item in items))
            try:
                seq, left = self._step(
                    keys=[self.keys.entries, self.keys.seq, self.keys.stream,
                          self.keys.digest, self.keys.history, self.keys.batch,
                          self.keys.batch_list, self.keys.batch_lease, self.keys.ends_since,
                          *map(self.keys.ends, names)],
                    args=[batch, token, LEASE_MS, self.retention_ms, self.history_ms,
                          len(items), items[0], items[-1], *names])
            except redis.ResponseError as exc:
                code = str(exc).partition(" ")[0]
                if code == "REARRANGE_LEASE":
                    raise BanlistConflict("lease", str(exc).partition(" ")[2]) from exc
                if code == "REARRANGE_NOBATCH" and self.under_way() == batch:
                    continue  # a retried chunk that had committed: read the head again
                raise
            if not left:
                return int(seq)

    def under_way(self) -> str | None:
        """The id of the batch under way, if one is."""
        held = self.client.get(self.keys.batch)
        return None if held is None else str(orjson.loads(held)["id"])

    def state(self) -> dict[str, Any] | None:
        """The batch under way ({id, first, last, total, actor, reason, left, writer_alive}),
        or None."""
        pipe = self.client.pipeline(transaction=True)
        pipe.get(self.keys.batch)
        pipe.llen(self.keys.batch_list)
        pipe.exists(self.keys.batch_lease)
        held, left, alive = pipe.execute()
        if held is None:
            return None
        return {**orjson.loads(held), "left": left, "writer_alive": bool(alive)}

    def finish_abandoned(self) -> int:
        """Finish a batch whose writer died (its lease ran out): take the lease, then the
        chunks left. How many removals that committed (0: none abandoned)."""
        state = self.state()
        if state is None or state["writer_alive"]:
            return 0
        token = uuid.uuid4().hex
        if not self.client.set(self.keys.batch_lease, token, nx=True, px=LEASE_MS):
            return 0  # another replica took it first
        log.warning("banlist: finishing bulk removal %s by %s (%s): its writer went silent "
                    "with %d of %d removals left", state["id"], state["actor"],
                    state["reason"], state["left"], state["total"])
        try:
            self.run(state["id"], token)
        except BanlistConflict:
            return 0  # yet another replica took it over
        return int(state["left"])

    def wait(self, deadline: float) -> None:
        """Wait for the batch under way to close (finishing it if its writer died) until
        `deadline` (time.monotonic()); BanlistUnavailable past it."""
        while True:
            state = self.state()
            if state is None:
                return
            if not state["writer_alive"]:
                self.finish_abandoned()
                continue
            if time.monotonic() >= deadline:
                raise BanlistUnavailable("banlist", (
                    f"a bulk removal by {state['actor']} is under way ({state['left']} of "
                    f"{state['total']} removals left): other writes wait for it; this one "
                    f"was not made, send it again shortly"))
            time.sleep(POLL)
