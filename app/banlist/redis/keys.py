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
        self.base = base

    def outcome(self, write_id: str) -> str:
        """Where a write script leaves its result (or a fence that it will never run)."""
        return f"{self.base}write:{write_id}"

    def seed_stage(self) -> str:
        """A staging hash of its own for one seeder (two replicas may seed at once)."""
        return f"{self.base}seed:{uuid.uuid4().hex}"

    def write(self) -> list[str]:
        return [self.entries, self.groups, self.seq, self.epoch, self.stream]
