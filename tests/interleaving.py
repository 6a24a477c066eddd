"""Team-draft interleaving written out from the paper, for the tests to compare the engine
with: Radlinski, Kurup and Joachims, "How does clickthrough data reflect retrieval
quality?" (CIKM 2008), and the coins docs/experiments.md ("Interleaving") documents."""
from __future__ import annotations

import unicodedata
from collections.abc import Iterator

import mmh3


def coins(experiment: str, salt: str, unit: str, query: str) -> Iterator[bool]:
    """Flip i is bit i mod 32 of MurmurHash3 x86 32-bit (seed i div 32 + 1) of
    "<experiment>:<salt>:<NFC unit>:<NFC query>"; a set bit: the treatment picks first."""
    nfc = unicodedata.normalize
    key = f"{experiment}:{salt}:{nfc('NFC', unit)}:{nfc('NFC', query)}".encode()
    i = 0
    while True:
        yield (mmh3.hash(key, i // 32 + 1, signed=False) >> (i % 32)) & 1 == 1
        i += 1


def team_draft(a: list[str], b: list[str], flips: Iterator[bool]) -> list[tuple[str, str]]:
    """(document, team) of the merge of control ranking `a` and treatment ranking `b`: the
    team with fewer picks picks its best document not yet shown, a coin decides equal
    picks; when one team has nothing left the other goes on, up to the longer list's
    length."""
    merged: list[tuple[str, str]] = []
    picks = {"control": 0, "treatment": 0}
    while len(merged) < max(len(a), len(b)):
        shown = {d for d, _ in merged}
        left_a = [d for d in a if d not in shown]
        left_b = [d for d in b if d not in shown]
        if not left_a and not left_b:
            break
        if not left_b:
            team = "control"
        elif not left_a:
            team = "treatment"
        elif picks["control"] != picks["treatment"]:
            team = min(picks, key=lambda t: picks[t])
        else:
            team = "treatment" if next(flips) else "control"
        picks[team] += 1
        merged.append(((left_a if team == "control" else left_b)[0], team))
    return merged
