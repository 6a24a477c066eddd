"""The reference runner: documents, context, audit records and the phased pipeline run.

The Python request path before the engine (crates/engine/src/runner.rs), without what only
production needed (timings, per-rule effects and tallies for the metrics, speed-ups): a
profile's configured pipeline (app/config/pipeline.py) with each step's rule replaced by its
Python behaviour (tests/reference/rules/), run on Docs.
"""
from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any, ClassVar

import msgspec

from app.config.pipeline import Step
from app.config.step_keys import CLOSED, default_on_error
from app.errors import FieldError
from app.experiments.bucketing import CONTROL
from app.phases import Phase
from tests.reference.backfill import Cut, refill
from tests.reference.errors import DeadlineExceeded, RefusedOutput, RuleFailed
from tests.reference.records import APPLIED, SHADOW, AuditRecord
from tests.reference.step_keys import runs_at


class Doc(msgspec.Struct):
    """One result of the page; rules never mutate a Doc, they build changed copies."""

    id: str
    url: str
    score: float
    original_score: float  # the ranker's score, kept for the response and the audit
    canonical: str = ""
    host: str = ""
    original_position: int = 0
    factors: dict[str, float] = {}
    spam_score: float = 0.0
    adult_score: float = 0.0
    domain_age_days: float | None = None
    is_ad: bool = False
    topics: Sequence[str] = ()
    blocked_regions: frozenset[str] = frozenset()
    text: str | None = None
    signature: Any = None
    attributes: dict[str, Any] = {}
    annotations: tuple[str, ...] = ()
    collapsed: tuple[dict[str, str], ...] = ()
    # The optional fields the request gave for it, as decoded (null ones included): what a
    # Python rule is handed beside id, url and score. None: a Doc not built from a request.
    given: dict[str, Any] | None = None

    def replace(self, **changes: Any) -> Doc:
        """A copy with some fields changed; rules call it instead of mutating."""
        return msgspec.structs.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class Context:
    """What a rule may know about the request; fixed for the whole run."""

    query_text: str = ""
    classes: tuple[str, ...] = ()
    region: str | None = None
    age_mode: str = "moderate"
    depth: int | None = None
    input_count: int = 0
    now: float = field(default_factory=time.time)
    banlist: Any = None  # a BanIndex (tests/reference/banlist_index.py or app.banlist.index)
    variants: Mapping[str, str] = field(default_factory=dict)  # experiment → variant
    quarantine: Any = None  # the sanctions quarantine list, a BanIndex like `banlist`
    relaxed_from: str | None = None
    deadline: float | None = None  # a `clock` time past which optional rules stop or never start
    # Read only to check the deadline, so a test's ticking clock counts the checks.
    clock: Callable[[], float] = time.perf_counter
    query: Any = None  # the request's query (contract.Query), as Python rules are given it

    def deadline_passed(self) -> bool:
        """True once the deadline has passed (one clock read)."""
        return self.deadline is not None and self.clock() > self.deadline

    def check_deadline(self) -> None:
        """Raise DeadlineExceeded once the deadline has passed; optional rules call it as
        they work (per document, per block of comparisons)."""
        if self.deadline_passed():
            raise DeadlineExceeded("the request's deadline passed")


RuleResult = tuple[list[Doc], list[AuditRecord]]


class Behaviour:
    """What a rule does to a page, beside its declaration (app/rules/): mixed into a
    declared rule's class, which gives it `name`, `phases`, `params` and `phase`."""

    name: ClassVar[str]
    phase: Phase
    params: Any  # the declared rule's Params (BuiltinRule[P].params), or a plugin's
    # Optional: not started once the request's deadline has passed, and free to give up when
    # it passes midway (ctx.check_deadline); either way reported in `skipped`, page unchanged.
    optional: ClassVar[bool] = False

    def applies(self, ctx: Context) -> bool:
        return True

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        raise NotImplementedError

    def record(self, doc_id: str | None, action: str, reason: str,
               delta: float | int | None = None) -> AuditRecord:
        """An audit record stamped with this rule's name and phase."""
        return AuditRecord(self.name, self.phase, doc_id, action, reason, delta, APPLIED)

    def removing(self, docs: list[Doc], removals: list[tuple[int, str]]) -> RuleResult:
        """The page without docs[i] for each (i, reason), i ascending; one record each, and
        one for each document collapsed under it (`dropped`)."""
        if not removals:
            return docs, []
        gone = {i for i, _ in removals}
        records: list[AuditRecord] = []
        for i, reason in removals:
            self.dropped(records, docs[i], "remove", reason)
        return [d for i, d in enumerate(docs) if i not in gone], records

    def dropped(self, records: list[AuditRecord], doc: Doc, action: str, reason: str) -> None:
        """Records for a document dropped from the page (`remove`, `trim`) and for each one
        collapsed under it, which goes with it: without its own record it would vanish from
        the response unexplained (a post-filter or a trim runs after diversify)."""
        records.append(self.record(doc.id, action, reason))
        verb = "trimmed" if action == "trim" else "removed"
        for c in doc.collapsed:
            records.append(self.record(c["id"], action,
                                       f"collapsed under {doc.id}, {verb} with it: {reason}"))

    def rescoring(self, docs: list[Doc],
                  changes: list[tuple[int, float, float, str]]) -> RuleResult:
        """The page with docs[i] rescored for each (i, new score, delta, reason)."""
        out = docs.copy()
        records = []
        for i, score, delta, reason in changes:
            out[i] = docs[i].replace(score=score)
            records.append(self.record(docs[i].id, "rescore", reason, delta))
        return out, records


@dataclass(slots=True)
class Outcome:
    """The result of a run: final documents, every audit record, the fallback if any."""

    docs: list[Doc]
    audit: list[AuditRecord]
    fallback: dict[str, str] | None
    skipped: list[dict[str, str]] = field(default_factory=list)  # deadline, or failed open


def emptied(count: int) -> str:
    """How every fallback record starts: the page the filters emptied."""
    return f"filters removed all {count} documents"


def problem_of(exc: BaseException) -> str:
    """The failure as the 503 body and the skipped list say it: a refused output by its
    message, anything else raised by its type and message, each on one line."""
    if isinstance(exc, RefusedOutput):
        return f"returned output the runner refuses: {exc}"
    return f"raised {one_line(type(exc).__name__)}: {one_line(str(exc))}"


MAX_MESSAGE_CHARS = 1000


def one_line(text: str) -> str:
    """What a rule wrote, on one line: C0 and C1 control characters and U+2028/U+2029
    spelled as Python's repr spells them, cut after MAX_MESSAGE_CHARS characters."""
    out = []
    for c in text[:MAX_MESSAGE_CHARS]:
        control = unicodedata.category(c) == "Cc" or c in "\u2028\u2029"
        out.append(repr(c)[1:-1] if control else c)
    if len(text) > MAX_MESSAGE_CHARS:
        out.append(f"... ({len(text) - MAX_MESSAGE_CHARS} more characters)")
    return "".join(out)


SORT_RULE = "sort"  # the runner's own name for the stable sort that closes `rerank`
# `skipped[].reason` of an optional rule: not started because the deadline had passed, or
# started and given up when it passed; and of a rule that failed open or in shadow.
SKIPPED_LATE = "deadline"
STOPPED_LATE = "deadline (stopped while running)"
FAILED = "error"
_DISPLACED = "stable sort by score after rerank: displaced by rescored documents"


def sort_by_score(docs: list[Doc]) -> tuple[list[Doc], list[AuditRecord]]:
    """Stable sort by score, best first, with a `move` record for every doc that moved."""
    ordered = sorted(docs, key=attrgetter("score"), reverse=True)
    before = {id(doc): i for i, doc in enumerate(docs)}
    records = []
    for after, doc in enumerate(ordered):
        delta = after - before[id(doc)]
        if delta:
            why = (_DISPLACED if doc.score == doc.original_score else
                   f"stable sort by score after rerank: score {doc.original_score:g} -> "
                   f"{doc.score:g}")
            records.append(AuditRecord(SORT_RULE, Phase.RERANK, doc.id, "move", why, delta,
                                       APPLIED))
    return ordered, records


class Pipeline:
    """A profile's steps per phase, each with its rule's behaviour, and the run."""

    def __init__(self, profile: str, phases: Sequence[tuple[Phase, Sequence[Step]]]) -> None:
        self.profile = profile
        self.phases = tuple((phase, tuple(steps)) for phase, steps in phases)

    @classmethod
    def of(cls, configured: Any, behaviour: Callable[[Any], Behaviour]) -> Pipeline:
        """The configured pipeline (app.config.pipeline.Pipeline) with `behaviour(rule)` for each
        step's rule and variant rules."""
        return cls(configured.profile, [
            (phase, [replace(step, rule=behaviour(step.rule),
                             variants={v: behaviour(r) for v, r in step.variants.items()})
                     for step in steps])
            for phase, steps in configured.phases])

    def rules(self) -> list[tuple[Phase, Step]]:
        """Every (phase, step) in run order."""
        return [(phase, step) for phase, steps in self.phases for step in steps]

    def run(self, docs: list[Doc], ctx: Context) -> Outcome:
        """Run every phase in order; relax and rerun once if the fallback asks to."""
        outcome = self._run_once(docs, ctx)
        relax = next((r for r in outcome.audit if r.relax_to and r.mode == APPLIED), None)
        if relax is None:
            return outcome
        rerun = self.run(docs, replace(ctx, age_mode=relax.relax_to, relaxed_from=ctx.age_mode))
        fallback = rerun.fallback or {"rule": relax.rule, "action": "relax",
                                      "reason": relax.reason}
        # The first attempt's records describe a page nobody is shown: keep only the fallback.
        return Outcome(rerun.docs, [relax, *rerun.audit], fallback,
                       outcome.skipped + rerun.skipped)

    def _run_once(self, docs: list[Doc], ctx: Context) -> Outcome:
        audit: list[AuditRecord] = []
        skipped: list[dict[str, str]] = []
        cut = Cut()
        for phase, steps in self.phases:
            if phase is Phase.TRIM:
                cut.enter(docs)
            for at, step in enumerate(steps):
                out = self.step(phase, step, docs, ctx, audit, skipped)
                if out is None:
                    continue
                before, docs = docs, out
                if phase is Phase.TRIM:
                    cut.keep(before, docs)
                elif phase is Phase.POST_FILTER and len(docs) < len(before) and cut.docs:
                    docs = refill(self, steps[:at + 1], len(before) - len(docs), docs, cut,
                                  ctx, audit, skipped)
            if phase is Phase.RERANK:
                docs, moves = sort_by_score(docs)
                audit.extend(moves)
        fallback = None
        for rec in audit:
            if rec.action == "fallback" and rec.mode == APPLIED and not rec.relax_to:
                fallback = {"rule": rec.rule, "action": "empty", "reason": rec.reason}
        asks_relax = any(r.relax_to and r.mode == APPLIED for r in audit)
        if not docs and ctx.input_count and fallback is None and not asks_relax:
            # A profile without empty_result_fallback must still never return a silent empty page.
            reason = f"{emptied(ctx.input_count)}; nothing safe was found"
            audit.append(AuditRecord("pipeline", Phase.POST_FILTER, None, "fallback", reason,
                                     None, APPLIED))
            fallback = {"rule": "pipeline", "action": "empty", "reason": reason}
        return Outcome(docs, audit, fallback, skipped)

    def step(self, phase: Phase, step: Step, docs: list[Doc], ctx: Context,
             audit: list[AuditRecord], skipped: list[dict[str, str]]) -> list[Doc] | None:
        """Run one step on the page, its records into `audit`; the new page when it ran
        applied, None when the page goes on as it came."""
        if not runs_at(step.policy, ctx.now):
            return None  # `enabled: false`, or outside valid_from..valid_until
        mode, rule = self.gated(step, ctx)
        if not rule.applies(ctx):
            return None
        if rule.optional and ctx.deadline_passed():
            # The frontend's budget is spent: an optional rule is not worth the wait.
            skipped.append({"rule": rule.name, "phase": phase, "reason": SKIPPED_LATE})
            return None
        try:
            out, records = rule(docs, ctx)
        except FieldError:  # bad input a rule found (a signature of the wrong k): 4xx
            raise
        except Exception as exc:  # the failure policy decides; nothing is swallowed
            # The page goes on as it came, with none of the rule's records.
            if rule.optional and isinstance(exc, DeadlineExceeded):
                skipped.append({"rule": rule.name, "phase": phase, "reason": STOPPED_LATE})
                return None
            on_error = step.policy.on_error or default_on_error(phase)
            if mode == APPLIED and on_error == CLOSED:
                raise RuleFailed(rule.name, phase, problem_of(exc)) from exc
            skipped.append({"rule": rule.name, "phase": phase, "reason": FAILED})
            return None
        if mode == SHADOW:  # the records say what it would have done; `out` is dropped
            for rec in records:
                rec.mode = SHADOW
        audit.extend(records)
        return out if mode == APPLIED else None

    @staticmethod
    def gated(step: Step, ctx: Context) -> tuple[str, Behaviour]:
        """A step's mode and rule: a gated one is applied only in treatment variants."""
        if step.experiment is None:
            return APPLIED, step.rule
        variant = ctx.variants.get(step.experiment)
        if variant is None or variant == CONTROL:
            return SHADOW, step.rule
        return APPLIED, step.variants.get(variant, step.rule)
