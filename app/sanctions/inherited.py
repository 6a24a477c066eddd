"""What a host inherits from its parent domains: their sanction states, and the bans and
quarantines that cover it through them.

A quarantine or ban of `yellow.example` (scope domain) demotes or removes
`www.yellow.example` too, though the host itself was never scored: a host's own state alone
would call it "clean", which is how T&S were misled (issue 49).
"""
from __future__ import annotations

from typing import Any

from app.banlist import canon
from app.banlist.base import BanStore
from app.banlist.model import Entry
from app.domains import is_public_suffix
from app.sanctions.machine import BANNED, CLEAN, QUARANTINE, HostState
from app.sanctions.states import HostStates

INHERITED_SCOPES = ("domain", "org")  # the scopes whose entries cover a host's subdomains


def parents(states: HostStates, key: str) -> list[HostState]:
    """The sanction states of `key`'s parent domains (nearest first) that are not clean."""
    found = []
    for name in canon.host_suffixes(key)[1:]:
        if is_public_suffix(name):
            break  # above the registrable domain: nothing can be sanctioned there
        state = states.get(name)
        if state.state != CLEAN:
            found.append(state)
    return found


def parent(state: HostState) -> dict[str, Any]:
    """A parent's state, and whether it reaches its subdomains: a domain-scoped sanction
    does; one scored as a host covers that host alone."""
    return {"key": state.key, "scope": state.scope, "state": state.state, "score": state.score,
            "observed_at": state.observed_at, "covers_subdomains": state.scope == "domain"}


def entries(key: str, banlist: BanStore, quarantine: BanStore, now: float) -> list[dict[str, Any]]:
    """Unexpired ban and quarantine entries that cover `key` through a parent domain or an
    org group (whoever made them: a T&S domain ban counts as much as a sanction's)."""
    canonical = canon.canonicalize(f"http://{key}/")
    host = canon.host_of(canonical)
    found = []
    for sanction, store in ((BANNED, banlist), (QUARANTINE, quarantine)):
        for match in store.index.explain(canonical, host):
            if _through_parent(match.entry, key) and match.entry.unexpired(now):
                found.append({"sanction": sanction, "via": match.entry.value,
                              **match.as_dict()})
    return found


def _through_parent(entry: Entry, key: str) -> bool:
    return entry.scope in INHERITED_SCOPES and not (entry.scope == "domain" and
                                                    entry.value == key)
