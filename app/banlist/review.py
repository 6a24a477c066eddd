"""Four eyes on high-impact bans: a ban that would have removed results from more than
REARRANGE_BAN_REVIEW_SHARE of the recent requests waits for a second person.

How much a ban would remove is read from the traffic counts of the engine (the hosts and
domains of the pages this process served over the last hour, crates/engine/src/traffic.rs):

- `domain` and `host`: the requests whose page held the name, or a host under it;
- `prefix`: its host's (an upper bound: the prefix is part of the host);
- `org`: its member domains' summed (an upper bound: a page may hold two of them);
- `url`: not weighed. One page of a site is what a URL ban is for; weighing it by its
  host would send every URL ban on a large site to review.

A ban's regions are not weighed either (the counts are global): a ban in one region is
weighed as if it applied everywhere. Each bound errs one way, towards a review.

A pending ban is an entry of a store of its own (`review`, built like the banlist and the
quarantine: replicated through Redis, durable, with its own history), which the request
path never reads. Approving adds the ban to the banlist, with the proposer as its actor,
and removes the pending entry, the approver and their reason recorded in the review
list's history; rejecting removes it. An urgent ban (`urgent`, by someone who may
approve) is banned at once and also put in the review list, where it shows as in effect
until a second person approves it (it stays) or rejects it (it is lifted).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from app.banlist.base import (
    BanStore,
    EntrySpec,
    GroupSpec,
    Prepared,
    identical,
    prepare,
    still_banning,
)
from app.banlist.model import Entry
from app.errors import BanlistNotFound, Forbidden

# (requests whose page held the key, at most; requests), over the window ending now
Traffic = Callable[[str], tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Impact:
    """How many recent requests a ban would have removed results from: `share` of
    `requests` (None: a scope not weighed), through `keys`."""

    share: float | None
    served: int
    requests: int
    keys: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"share": self.share, "served": self.served, "requests": self.requests,
                "keys": list(self.keys)}


def keys_of(scope: str, value: str, groups: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The traffic keys whose counts bound what a ban of (scope, normalized value) removes;
    empty for a scope not weighed."""
    if scope in ("domain", "host"):
        return (value,)
    if scope == "prefix":
        host = value.split("/", 1)[0]
        name, colon, port = host.rpartition(":")
        return (name if colon and port.isdigit() and not host.endswith("]") else host,)
    if scope == "org":
        return groups.get(value, ())
    return ()


def impact(scope: str, value: str, groups: dict[str, tuple[str, ...]],
           traffic: Traffic) -> Impact:
    """What a ban of (scope, normalized value) would have removed, by the traffic counts."""
    keys = keys_of(scope, value, groups)
    if not keys:
        return Impact(None, 0, 0, ())
    served, requests = 0, 0
    for key in keys:
        count, requests = traffic(key)
        served += count
    served = min(served, requests)
    return Impact(served / requests if requests else 0.0, served, requests, keys)


@dataclass(frozen=True, slots=True)
class Proposal:
    """What an add came to: `entry` banned now (None while pending), `pending` the review
    list's entry (None when no review is due), the ban's impact, and `existing` when an
    identical ban (or pending ban) was already there."""

    entry: Entry | None
    pending: Entry | None
    impact: Impact
    existing: bool


class Reviews:
    """The review list beside the banlist, and the rule that sends bans to it."""

    def __init__(self, banlist: BanStore, pending: BanStore, traffic: Traffic,
                 review_share: float, clock: Callable[[], float],
                 counted: Callable[[str], None]) -> None:
        self.banlist = banlist
        self.pending = pending
        self.traffic = traffic
        self.review_share = review_share
        self.clock = clock
        self._counted = counted  # told each outcome: pending, urgent, approved, rejected

    def propose(self, spec: EntrySpec, actor: str, urgent: bool = False) -> Proposal:
        """Ban `spec` now, or put it in the review list when its impact is over the share
        (always as well as banning, when `urgent`; the caller checked the right)."""
        now = self.clock()
        groups = self.banlist.index.groups
        prepared = prepare(spec, now, groups)
        weighed = impact(prepared.scope, prepared.value, groups, self.traffic)
        held = identical(self.banlist.index, prepared, now)
        if held is not None:  # nothing would change: no review
            return Proposal(held, None, weighed, True)
        over = weighed.share is not None and weighed.share > self.review_share
        if not (over or urgent):
            banned, existing = self.banlist.put_many([spec], actor)[0]
            return Proposal(banned, None, weighed, existing)
        pending, existing = self.pending.put_many([spec], actor)[0]
        # urgent: banned at once, the pending entry above flags it for review after the fact
        entry = self.banlist.put_many([spec], actor)[0][0] if urgent else None
        if not existing:
            self._counted("urgent" if urgent else "pending")
        return Proposal(entry, pending, weighed, existing and not urgent)

    def over_share(self, specs: Iterable[tuple[int, EntrySpec]],
                   defined: Iterable[GroupSpec] = ()) -> list[dict[str, Any]]:
        """{line, field, problem} for each (line, spec) of an import whose ban is new and
        over the share: an import does not pass by the review an add would meet. The
        import's own group definitions (`defined`) count for its org entries."""
        now = self.clock()
        groups = {**self.banlist.index.groups, **{g.name: g.domains for g in defined}}
        refused = []
        for line, spec in specs:
            prepared = prepare(spec, now, groups)  # the import validated it already
            weighed = impact(prepared.scope, prepared.value, groups, self.traffic)
            if (weighed.share is None or weighed.share <= self.review_share
                    or identical(self.banlist.index, prepared, now) is not None):
                continue
            refused.append({"line": line, "field": "value", "problem": (
                f"{prepared.scope} {prepared.value} would have removed results from "
                f"{weighed.share:.2%} of the last hour's requests (over "
                f"REARRANGE_BAN_REVIEW_SHARE, {self.review_share:g}): add it with POST "
                "/v1/banlist/entries, where a second person reviews it, or import with a "
                "token that may approve")})
        return refused

    def listed(self) -> list[dict[str, Any]]:
        """Every pending ban, oldest first, with whether it is in effect (an urgent one)
        and its impact now."""
        now = self.clock()
        groups = self.banlist.index.groups
        return [self.describe(e, now, groups) for e in self.pending.active()]

    def describe(self, pending: Entry, now: float,
                 groups: dict[str, tuple[str, ...]]) -> dict[str, Any]:
        """A pending ban as the API shows it."""
        weighed = impact(pending.scope, pending.value, groups, self.traffic)
        return {**pending.as_dict(), "in_effect": self._banning(pending, now) is not None,
                "impact": weighed.as_dict()}

    def matching(self, canonical: str, host: str) -> list[dict[str, Any]]:
        """The pending bans that would match a URL (lookup's `pending`)."""
        now = self.clock()
        groups = self.banlist.index.groups
        return [self.describe(m.entry, now, groups)
                for m in self.pending.index.explain(canonical, host)
                if m.entry.unexpired(now)]

    def approve(self, pending_id: str, actor: str, reason: str) -> tuple[Entry, Entry]:
        """Ban what `pending_id` asks, its proposer the ban's actor, then take it off the
        review list; (the ban, the pending entry). Forbidden to its own proposer."""
        pending = self._pending(pending_id)
        if pending.actor == actor:
            raise Forbidden("id", f"pending ban {pending_id} was proposed by {actor}: a "
                            "second person approves it")
        spec = EntrySpec(pending.scope, pending.value, pending.reason,
                         tuple(sorted(pending.regions)), pending.expires_at, pending.actor)
        # the ban first: if the removal below fails, approving again finds it and adds nothing
        entry = self.banlist.put_many([spec], actor)[0][0]
        self.pending.remove(pending_id, actor, f"approved: {reason}")
        self._counted("approved")
        return entry, pending

    def reject(self, pending_id: str, actor: str, reason: str,
               may_approve: bool) -> tuple[Entry, list[Entry]]:
        """Take `pending_id` off the review list, and lift the ban if it is in effect (an
        urgent one); (the pending entry, the bans lifted). Its proposer may withdraw it;
        anyone else needs the right to approve."""
        pending = self._pending(pending_id)
        if not may_approve and pending.actor != actor:
            raise Forbidden("id", "rejecting another's pending ban needs the right to approve "
                            "(rearrange:approve)")
        lifted = []
        now = self.clock()
        if (banning := self._banning(pending, now)) is not None:
            lifted = [self.banlist.remove(e.id, actor, f"rejected on review: {reason}")
                      for e in (banning, *still_banning(self.banlist.index, banning, now))
                      if e.regions == banning.regions]
        self.pending.remove(pending_id, actor, f"rejected: {reason}")
        self._counted("rejected")
        return pending, lifted

    def _pending(self, pending_id: str) -> Entry:
        entry = self.pending.index.get(pending_id)
        if entry is None or not entry.unexpired(self.clock()):
            raise BanlistNotFound("id", f"no pending ban {pending_id!r} (approved, rejected, "
                                  "expired, or never proposed: GET /v1/banlist/pending)")
        return entry

    def _banning(self, pending: Entry, now: float) -> Entry | None:
        """The active ban identical to `pending`, if one is in effect."""
        p = Prepared(pending.scope, pending.value, pending.reason, pending.expires_at,
                     pending.regions)
        return identical(self.banlist.index, p, now)

