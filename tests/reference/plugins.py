"""The reference runner's side of Python rules: the plugin's instance called on dicts,
its output checked and turned back into Docs and records (the engine's is
crates/engine/src/rules/python.rs and python_output.rs)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec

from app.config import plugins
from app.phases import Phase
from tests.reference.errors import RefusedOutput
from tests.reference.pipeline import APPLIED, AuditRecord, Behaviour, Context, Doc, RuleResult

# What a Python rule can do to a page through the dicts it returns; annotations and
# collapses are built-in rules' business (a dict cannot carry them back).
ACTIONS = frozenset({"remove", "trim", "rescore", "move"})
_RECORD_KEYS = frozenset({"doc_id", "action", "reason", "delta"})
MAX_SCORE = 1e15  # the request's own bound on scores: sums of deltas stay finite


def doc_dict(doc: Doc) -> dict[str, Any]:
    """A Doc as the request's document dict: id, url, the current score and every field the
    request gave for it (CONTRACT "Python rules"), each call its own copy."""
    return {"id": doc.id, "url": doc.url, "score": doc.score,
            **msgspec.to_builtins(doc.given or {})}


class PythonRule(Behaviour):
    """A configured Python rule (app.config.plugins.PythonRule) run on dicts, its output checked."""

    def __init__(self, configured: plugins.PythonRule) -> None:
        self.name = configured.name
        self.phase = configured.phase
        self.params = configured.params
        self.instance = configured.instance
        self.profile = configured.profile

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        context = {"query": msgspec.to_builtins(ctx.query), "profile": self.profile,
                   "variants": dict(ctx.variants), "phase": self.phase.value}
        return self.checked(docs, self.instance([doc_dict(d) for d in docs], context))

    def checked(self, docs: list[Doc], result: Any) -> RuleResult:
        """The rule's (documents, records) as Docs and AuditRecords; RefusedOutput when it
        breaks the contract (unknown or repeated id, bad score, a change without a record)."""
        if not isinstance(result, tuple | list) or len(result) != 2:
            raise RefusedOutput(f"returned {type(result).__name__}, not (documents, records)")
        out, raw_records = result
        if not isinstance(out, list) or not isinstance(raw_records, list):
            raise RefusedOutput("documents and records must both be lists")
        by_id = {d.id: d for d in docs}
        page = self._page(out, by_id)
        records = self._records(raw_records, by_id)
        kept = {d.id for d in page}
        said = {(r.doc_id, r.action): r for r in records}
        for doc in docs:
            if doc.id not in kept and (doc.id, "remove") not in said and (
                    doc.id, "trim") not in said:
                raise RefusedOutput(f"removed {doc.id!r} without a remove or trim record")
        for doc in page:
            before = by_id[doc.id].score
            if doc.score != before:
                rec = said.get((doc.id, "rescore"))
                if rec is None:
                    raise RefusedOutput(f"rescored {doc.id!r} without a rescore record")
                if rec.delta is None:
                    rec.delta = doc.score - before
        if self.phase is Phase.RERANK:
            # The stable sort by score after rerank orders the page; a rerank rule's own
            # order is not kept (the built-in ones never reorder either).
            order = {d.id: i for i, d in enumerate(docs)}
            page.sort(key=lambda d: order[d.id])
        else:
            self._check_moves(docs, page, said)
        records.extend(self._went_along(docs, kept, said))
        return page, records

    def _page(self, out: list[Any], by_id: Mapping[str, Doc]) -> list[Doc]:
        page: list[Doc] = []
        seen: set[str] = set()
        for i, item in enumerate(out):
            if not isinstance(item, dict):
                raise RefusedOutput(f"documents[{i}] is a {type(item).__name__}, not a dict")
            id_ = item.get("id")
            doc = by_id.get(id_) if isinstance(id_, str) else None
            if doc is None:
                raise RefusedOutput(f"documents[{i}]: id {id_!r} was not in its input")
            if id_ in seen:
                raise RefusedOutput(f"documents[{i}]: id {id_!r} appears twice")
            seen.add(id_)
            score = item.get("score")
            if isinstance(score, bool) or not isinstance(score, int | float) or not (
                    math.isfinite(score) and abs(score) <= MAX_SCORE):
                raise RefusedOutput(f"documents[{i}] {id_}: score {score!r} is not a finite "
                                    f"number within ±{MAX_SCORE:g}")
            page.append(doc if score == doc.score else doc.replace(score=float(score)))
        return page

    def _records(self, raw: list[Any], by_id: Mapping[str, Doc]) -> list[AuditRecord]:
        records = []
        for j, rec in enumerate(raw):
            where = f"records[{j}]"
            if not isinstance(rec, dict):
                raise RefusedOutput(f"{where} is a {type(rec).__name__}, not a dict")
            extra = sorted(str(k) for k in set(rec) - _RECORD_KEYS)
            if extra:
                raise RefusedOutput(f"{where}: unknown key {extra[0]!r} "
                                    "(a record has doc_id, action, reason, delta)")
            doc_id, action, reason = rec.get("doc_id"), rec.get("action"), rec.get("reason")
            delta = rec.get("delta")
            if not isinstance(doc_id, str) or doc_id not in by_id:
                raise RefusedOutput(f"{where}: doc_id {doc_id!r} was not in its input")
            if action not in ACTIONS:
                raise RefusedOutput(f"{where}: action {action!r} is not one a Python rule "
                                    f"takes ({', '.join(sorted(ACTIONS))})")
            if not isinstance(reason, str):
                raise RefusedOutput(f"{where}: reason must be a string")
            # An int delta is written as a JSON integer: one past 64 bits has no form there.
            if delta is not None and (isinstance(delta, bool) or not isinstance(
                    delta, int | float) or (isinstance(delta, int) and not
                    -2**63 <= delta < 2**63) or not math.isfinite(delta)):
                raise RefusedOutput(f"{where}: delta {delta!r} is not a finite number or null")
            records.append(AuditRecord(self.name, self.phase, doc_id, action, reason, delta,
                                       APPLIED))
        return records

    @staticmethod
    def _check_moves(docs: list[Doc], page: list[Doc],
                     said: Mapping[tuple[str | None, str], AuditRecord]) -> None:
        kept = {d.id for d in page}
        before = {id_: i for i, id_ in enumerate(d.id for d in docs if d.id in kept)}
        for after, doc in enumerate(page):
            delta = after - before[doc.id]
            if delta:
                rec = said.get((doc.id, "move"))
                if rec is None:
                    raise RefusedOutput(f"moved {doc.id!r} without a move record")
                if rec.delta is None:
                    rec.delta = delta

    def _went_along(self, docs: list[Doc], kept: set[str],
                    said: Mapping[tuple[str | None, str], AuditRecord]) -> list[AuditRecord]:
        """Records for documents collapsed under a dropped one: they go with it."""
        extra = []
        for doc in docs:
            if doc.id in kept or not doc.collapsed:
                continue
            rec = said.get((doc.id, "remove")) or said[(doc.id, "trim")]
            verb = "trimmed" if rec.action == "trim" else "removed"
            why = f"collapsed under {doc.id}, {verb} with it: {rec.reason}"
            extra.extend(AuditRecord(self.name, self.phase, c["id"], rec.action, why, None,
                                     APPLIED) for c in doc.collapsed)
        return extra
