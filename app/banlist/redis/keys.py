"""The Redis keys of one banlist (or quarantine list): what the writer's scripts and the
replica's reads name."""
from __future__ import annotations

import uuid


class Keys:
    """Key names; one hash tag so a Redis Cluster keeps them on one slot (scripts need that)."""

    def __init__(self, prefix: str) -> None:
        base = f"{prefix}{{banlist}}:"
        self.entries, self.groups = base + "entries", base + "groups"
        self.seq, self.epoch, self.stream = base + "seq", base + "epoch", base + "stream"
        self.stage_entries, self.stage_groups = base + "reseed:entries", base + "reseed:groups"
        self.durable = base + "durable"  # what a write's WAIT writes after it (durable.py)
        self.lost = base + "lost"  # replicas holding changes Redis lost (recovery.py)
        self.digest = base + "digest"  # the entries' and groups' digest (digest.py)
        # every change again, kept for REARRANGE_BANLIST_HISTORY_DAYS (the changelog `stream`
        # is for replication and keeps a day): what history and former entries read
        self.history = base + "history"
        # when the first end went into the index of ends below (a Redis written before it
        # has ends that are not in it): how far back that index reaches
        self.ends_since = base + "ends-since"
        # a bulk removal under way (batch.py): what it is, the removals it has left, and
        # the lease of the replica writing it
        self.batch, self.batch_list = base + "batch", base + "batch:list"
        self.batch_lease = base + "batch:lease"
        self.base = base

    def outcome(self, write_id: str) -> str:
        """Where a write script leaves its result (or a fence that it will never run)."""
        return f"{self.base}write:{write_id}"

    def ends(self, name: str) -> str:
        """The index of ends under `name` (a registrable domain, or `org:<group>`): a sorted
        set of the history records that removed or expired an entry, scored by their time
        in ms, kept for the history's window (app/banlist/redis/ends.py)."""
        return f"{self.base}ends:{name}"

    def seed_stage(self) -> str:
        """A staging hash of its own for one seeder (two replicas may seed at once)."""
        return f"{self.base}seed:{uuid.uuid4().hex}"

    def batch_stage(self) -> str:
        """A staging list of its own for one bulk removal, until it is opened."""
        return f"{self.base}batch:stage:{uuid.uuid4().hex}"

    def write(self) -> list[str]:
        return [self.entries, self.groups, self.seq, self.epoch, self.stream]
