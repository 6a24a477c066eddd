"""`rearrange dupes --compare previous.json`: which clusters grew, shrank, appeared or went
away since an earlier run, so a site owner can see whether the fixes helped.

Clusters are matched across the runs by the pages they share, not by their
representative (which may change as pages are fixed): the pairs of an old and a new
cluster sharing the most pages are matched first, one to one, when they share at least
MATCH of the smaller. A new cluster matched to none appeared; an old one matched to none
went away.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from app.errors import InputFileError

MATCH = 0.5  # an old and a new cluster sharing this share of the smaller are one cluster


@dataclass(frozen=True, slots=True)
class Change:
    """One cluster across the two runs: `before` or `after` is empty when it appeared or
    went away."""

    kind: str  # "appeared", "went away", "grew", "shrank", "changed" (its pages), "same"
    before: list[str]  # the earlier run's pages, representative first
    after: list[str]  # this run's

    @property
    def representative(self) -> str:
        return (self.after or self.before)[0]

    def as_json(self) -> dict[str, Any]:
        left, joined = sorted(set(self.before) - set(self.after)), sorted(
            set(self.after) - set(self.before))
        return {"change": self.kind, "representative": self.representative,
                "pages_before": len(self.before), "pages_after": len(self.after),
                "left": left, "joined": joined}


COMPARED = ("threshold", "measure", "width", "reworded")  # what makes two runs' clusters alike


def load(path: Path) -> tuple[list[list[str]], dict[str, Any]]:
    """The clusters (pages, representative first) of an earlier run's `--json` file, and
    its parameters that decide what a cluster is (COMPARED; those it records)."""
    try:
        doc = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise InputFileError(f"--compare {path}: {exc.strerror or exc}") from exc
    except orjson.JSONDecodeError as exc:
        raise InputFileError(f"--compare {path}: not JSON ({exc})") from exc
    clusters = doc.get("clusters") if isinstance(doc, dict) else None
    if not isinstance(clusters, list):
        raise InputFileError(f"--compare {path}: no \"clusters\" list: is it a file "
                             "`rearrange dupes --json` wrote?")
    found = []
    for n, cluster in enumerate(clusters):
        pages = cluster.get("pages") if isinstance(cluster, dict) else None
        if not (isinstance(pages, list) and pages and all(isinstance(p, str) for p in pages)):
            raise InputFileError(f"--compare {path}: clusters[{n}].pages is not a list of urls")
        found.append(pages)
    params = doc.get("params") if isinstance(doc.get("params"), dict) else {}
    return found, {k: params[k] for k in COMPARED if k in params}


def differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """"threshold 0.5 then, 0.3 now" for each parameter the runs do not share."""
    return [f"{k} {before[k]} then, {now.get(k)} now" for k in COMPARED
            if k in before and before[k] != now.get(k)]


def compare(before: list[list[str]], after: list[list[str]]) -> list[Change]:
    """The clusters of both runs matched, largest change first: appeared, went away, grew,
    shrank, changed (as many pages, not the same ones), then the same."""
    at: dict[str, int] = {}
    for n, pages in enumerate(before):
        for page in pages:
            at[page] = n
    shared: dict[tuple[int, int], int] = {}
    for m, pages in enumerate(after):
        for page in pages:
            if page in at:
                shared[at[page], m] = shared.get((at[page], m), 0) + 1
    old_of: dict[int, int] = {}
    taken: set[int] = set()
    for (n, m), count in sorted(shared.items(), key=lambda kv: (-kv[1], kv[0])):
        if n in taken or m in old_of:
            continue
        if count >= MATCH * min(len(before[n]), len(after[m])):
            old_of[m] = n
            taken.add(n)
    changes = []
    for m, pages in enumerate(after):
        if m not in old_of:
            changes.append(Change("appeared", [], pages))
            continue
        old = before[old_of[m]]
        kind = ("grew" if len(pages) > len(old) else "shrank" if len(pages) < len(old)
                else "same" if set(pages) == set(old) else "changed")
        changes.append(Change(kind, old, pages))
    changes += [Change("went away", pages, []) for n, pages in enumerate(before)
                if n not in taken]
    order = {"appeared": 0, "went away": 1, "grew": 2, "shrank": 3, "changed": 4, "same": 5}
    changes.sort(key=lambda c: (order[c.kind], -abs(len(c.after) - len(c.before)),
                                c.representative))
    return changes


def summary(changes: list[Change]) -> dict[str, int]:
    """How many clusters changed each way, and the pages in clusters before and after."""
    counts = {kind: sum(c.kind == kind for c in changes)
              for kind in ("appeared", "went away", "grew", "shrank", "changed", "same")}
    counts["pages_before"] = sum(len(c.before) for c in changes)
    counts["pages_after"] = sum(len(c.after) for c in changes)
    return counts
