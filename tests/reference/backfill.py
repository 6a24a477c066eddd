"""Backfill (crates/engine/src/runner_backfill.rs): when a post-filter removes documents from
a trimmed page, the runner refills it from the documents the trim cut, in their order and
within the trim rules.

A candidate is put back only if every applied post-filter step that has run so far keeps
it, and if the applied trim steps, run again on the page plus the candidates in their order
before the trim, keep it. A refilled document's trim records give way to one `backfill`
record, and it goes through the annotate steps like any other.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from app.config.pipeline import Step
from app.phases import Phase
from tests.reference.records import APPLIED, AuditRecord
from tests.reference.step_keys import runs_at

if TYPE_CHECKING:
    from tests.reference.pipeline import Context, Doc, Pipeline

BACKFILL_RULE = "backfill"
_TRIMMING = frozenset({"trim", "remove"})


class Cut:
    """What the trim cut and no refill has put back or ruled out, in order."""

    def __init__(self) -> None:
        self.docs: list[Doc] = []
        self.rank: dict[str, int] = {}

    def enter(self, docs: list[Doc]) -> None:
        """The page entering the trim: the order candidates are refilled in."""
        self.rank = {d.id: i for i, d in enumerate(docs)}

    def keep(self, before: list[Doc], after: list[Doc]) -> None:
        """Keep what an applied trim step cut: in `before`, not in `after`."""
        stays = {d.id for d in after}
        self.docs.extend(d for d in before if d.id not in stays)
        self.docs.sort(key=lambda d: self.rank[d.id])


def _kept_by(steps: Sequence[Step], docs: list[Doc], ctx: Context,
             pipeline: Pipeline) -> list[Doc] | None:
    """The documents every applied step of `steps` keeps; None if one fails."""
    for step in steps:
        if not runs_at(step.policy, ctx.now):
            continue
        mode, rule = pipeline.gated(step, ctx)
        if mode != APPLIED or not rule.applies(ctx):
            continue
        try:
            docs, _ = rule(docs, ctx)
        except Exception:  # noqa: BLE001 (the engine counts it; here: refill nothing)
            return None
    return docs


def _steps(pipeline: Pipeline, phase: Phase) -> tuple[Step, ...]:
    return next((steps for p, steps in pipeline.phases if p is phase), ())


def refill(pipeline: Pipeline, checks: Sequence[Step], removed: int, docs: list[Doc],
           cut: Cut, ctx: Context, audit: list[AuditRecord],
           skipped: list[dict[str, str]]) -> list[Doc]:
    """The page after `checks[-1]`, a post-filter step, removed `removed` documents from it,
    refilled from `cut`; the records go into `audit`."""
    safe = _kept_by(checks, list(cut.docs), ctx, pipeline)
    if safe is None:
        return docs
    safe_ids = {d.id for d in safe}
    # A candidate a post-filter refuses is refused by every later refill too.
    cut.docs = [d for d in cut.docs if d.id in safe_ids]
    if not cut.docs:
        return docs
    pool = sorted([*docs, *cut.docs], key=lambda d: cut.rank[d.id])
    kept = _kept_by(_steps(pipeline, Phase.TRIM), pool, ctx, pipeline)
    if kept is None:
        return docs
    back = {d.id for d in kept}
    refilled = [d for d in cut.docs if d.id in back]
    cut.docs = [d for d in cut.docs if d.id not in back]
    if not refilled:
        return docs
    by = pipeline.gated(checks[-1], ctx)[1].name
    _record(refilled, f"refilled after {by} removed {removed} from the page", audit)
    for step in _steps(pipeline, Phase.ANNOTATE):
        out = pipeline.step(Phase.ANNOTATE, step, refilled, ctx, audit, skipped)
        if out is not None:
            refilled = out
    page = list(docs)
    for doc in refilled:
        rank = cut.rank[doc.id]
        at = next((i for i, d in enumerate(page) if cut.rank[d.id] > rank), len(page))
        page.insert(at, doc)
    return page


def _record(refilled: list[Doc], reason: str, audit: list[AuditRecord]) -> None:
    """Replace the trim records of the refilled documents (and of those folded under them,
    which come back with them) by one `backfill` record each."""
    back = {d.id for d in refilled} | {c["id"] for d in refilled for c in d.collapsed}
    audit[:] = [r for r in audit if not (r.phase == Phase.TRIM and r.mode == APPLIED
                                         and r.action in _TRIMMING and r.doc_id in back)]
    for d in refilled:
        audit.append(AuditRecord(BACKFILL_RULE, Phase.POST_FILTER, d.id, "backfill", reason,
                                 None, APPLIED))
        why = f"collapsed under {d.id}, refilled with it: {reason}"
        audit.extend(AuditRecord(BACKFILL_RULE, Phase.POST_FILTER, c["id"], "backfill", why,
                                 None, APPLIED) for c in d.collapsed)
