"""Query rules: pin (diversify), hide (pre-filter), boost and bury (rerank)."""
from __future__ import annotations

import json
from typing import Any

from app.rules import query as declared
from app.rules.query import normalize
from tests.reference.pipeline import AuditRecord, Behaviour, Context, Doc, RuleResult


def matched(when: declared.When, ctx: Context) -> str | None:
    """What of the request met `when`, as the records say it; None when it does not hold."""
    parts: list[str] = []
    if when.classes:
        cls = next((c for c in ctx.classes if c in when.classes), None)
        if cls is None:
            return None
        parts.append(f"class {cls}")
    if when.regions:
        if ctx.region not in when.regions:
            return None
        parts.append(f"region {ctx.region}")
    said: list[str] = []
    if when.query_is or when.query_contains or when.query_words:
        text = normalize(ctx.query_text)
        line = f" {text} "
        if when.query_is:
            if text not in when.query_is:
                return None
            said.append(f'query is "{text}"')
        if when.query_contains:
            hit = next((p for p in when.query_contains if f" {p} " in line), None)
            if hit is None:
                return None
            said.append(f'query contains "{hit}"')
        if when.query_words:
            words = list(dict.fromkeys(w for item in when.query_words for w in item.split()))
            if not all(f" {w} " in line for w in words):
                return None
            said.append("query has " + ", ".join(f'"{w}"' for w in words))
    parts = said + parts
    return "when " + ", ".join(parts) if parts else "on every query"


def _same(want: Any, got: Any) -> bool:
    if isinstance(want, bool):
        return isinstance(got, bool) and got == want
    if isinstance(want, int | float):
        return isinstance(got, int | float) and not isinstance(got, bool) and (
            float(got) == float(want))
    return isinstance(got, str) and got == want


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"{float(value):g}"
    return json.dumps(value, ensure_ascii=False)


def hit(m: declared.Match, doc: Doc) -> str | None:
    """What target `doc` is, as a record says it; None when it is none of them."""
    if m.urls:
        key = doc.canonical.partition("://")[2]
        if key in m.urls:
            return f"url {key}"
    if doc.host:
        if doc.host in m.hosts:
            return f"host {doc.host}"
        for d in m.domains:
            if doc.host == d or doc.host.endswith("." + d):
                return f"domain {d}"
    if m.attributes and all(key in doc.attributes and _same(want, doc.attributes[key])
                            for key, want in m.attributes.items()):
        return "attributes " + ", ".join(f"{k}={_scalar(v)}"
                                         for k, v in sorted(m.attributes.items()))
    return None


class QueryRule(Behaviour):
    """What the three query rules share: the condition, said with the step's label."""

    def applies(self, ctx: Context) -> bool:
        return matched(self.params.when, ctx) is not None

    def said(self, ctx: Context) -> str | None:
        """`when …` (or `on every query`) and ` [label]`; None when the query misses."""
        when = matched(self.params.when, ctx)
        label = self.params.label
        return None if when is None else when + (f" [{label}]" if label else "")


class QueryHide(declared.QueryHide, QueryRule):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        when = self.said(ctx)
        if when is None:
            return docs, []
        return self.removing(docs, [(i, f"{what} hidden {when}")
                                    for i, d in enumerate(docs)
                                    if (what := hit(self.params.match, d)) is not None])


class QueryBoost(declared.QueryBoost, QueryRule):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        when = self.said(ctx)
        if when is None:
            return docs, []
        by = float(self.params.by)
        said = f"boost +{by:g}" if by > 0 else f"bury {by:g}"
        return self.rescoring(docs, [(i, d.score + by, by, f"{said} for {what} {when}")
                                     for i, d in enumerate(docs)
                                     if (what := hit(self.params.match, d)) is not None])


class QueryPin(declared.QueryPin, QueryRule):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        when = self.said(ctx)
        if when is None:
            return docs, []
        wanted = {pin.url: pin.position for pin in self.params.pin}
        found: dict[int, int] = {}  # position → index of the first document with its URL
        for i, doc in enumerate(docs):
            at = wanted.get(doc.canonical.partition("://")[2])
            if at is not None and at not in found:
                found[at] = i
        pins = sorted(found.items())
        pinned = set(found.values())
        rest = [i for i in range(len(docs)) if i not in pinned]
        order: list[tuple[int, int | None]] = []
        p = r = 0
        while len(order) < len(docs):
            slot = len(order) + 1
            if p < len(pins) and (pins[p][0] <= slot or r == len(rest)):
                order.append((pins[p][1], pins[p][0]))
                p += 1
            else:
                order.append((rest[r], None))
                r += 1
        records: list[AuditRecord] = []
        for j, (i, at) in enumerate(order):
            if i == j:
                continue
            if at is None:
                reason = f"moved by pinned results {when}"
            elif at == j + 1:
                reason = f"pinned at position {at} {when}"
            else:
                reason = f"pinned at position {at} (the page ends at {j + 1}) {when}"
            records.append(self.record(docs[i].id, "move", reason, j - i))
        if not records:
            return docs, []
        return [docs[i] for i, _ in order], records
