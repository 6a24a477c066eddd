"""The phased rule pipeline: documents, context, audit records and the runner."""
from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from operator import attrgetter
from typing import Any, ClassVar, Protocol

import msgspec
from pydantic import BaseModel

from app.effects import by_score, compare_ranked, effect
from app.errors import DeadlineExceeded, FieldError, RefusedOutput, RuleFailed
from app.experiments import CONTROL
from app.step_keys import CLOSED, StepPolicy, default_on_error


class Phase(StrEnum):
    """The six phases, in the order they run."""

    PRE_FILTER = "pre-filter"
    RERANK = "rerank"
    DIVERSIFY = "diversify"
    TRIM = "trim"
    ANNOTATE = "annotate"
    POST_FILTER = "post-filter"

    # Enum hashes by name in Python code; the str hash is C and agrees with == "rerank",
    # which matters where per-request tallies key on the phase.
    __hash__ = str.__hash__


PHASES: tuple[Phase, ...] = tuple(Phase)
# Enum members are looked up through the metaclass on Python 3.11 (~140 ns, 6x a global):
# the request path uses these module constants instead.
RERANK, POST_FILTER = Phase.RERANK, Phase.POST_FILTER
AGE_MODES: tuple[str, ...] = ("strict", "moderate", "off")  # strictest first
APPLIED, SHADOW = "applied", "shadow"


class Doc(msgspec.Struct, gc=False):
    """One result of the page; rules never mutate a Doc, they build changed copies.

    A msgspec Struct: built and copied in C (4x faster than a slots class here) and,
    with gc=False, never tracked by the garbage collector (tail latency is mostly GC).
    Its fields hold only strings, numbers, tuples, frozensets and the request's own
    dicts, so there is no cycle for the collector to find.
    """

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


class AuditRecord(msgspec.Struct, gc=False, omit_defaults=True):
    """One thing a rule did (or would have done, in shadow) to one document.

    Encoded by msgspec straight into the response as the CONTRACT's object: `delta` and
    `mode` have no default so they are always written; `relax_to` (only on a `fallback`
    that asks the runner to rerun with a milder age mode) is left out when unset.
    """

    rule: str
    phase: Phase
    doc_id: str | None
    action: str
    reason: str
    delta: float | int | None
    mode: str
    relax_to: str | None = None


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
    banlist: Any = None  # a BanIndex snapshot; Any keeps the pipeline free of banlist imports
    variants: Mapping[str, str] = field(default_factory=dict)  # experiment → variant
    quarantine: Any = None  # the sanctions quarantine list, a BanIndex like `banlist`
    relaxed_from: str | None = None
    deadline: float | None = None  # a `clock` time past which optional rules stop or never start
    # The clock `deadline` is on; the runner times rules with it too. Tests pass their own.
    clock: Callable[[], float] = time.perf_counter
    query: Any = None  # the request's query (contract.Query), as Python rules are given it

    def check_deadline(self) -> None:
        """Raise DeadlineExceeded once the deadline has passed.

        Optional rules call it as they work (per document, per block of comparisons): one
        clock read, so cheap enough per document, too dear per shingle.
        """
        if self.deadline is not None and self.clock() > self.deadline:
            raise DeadlineExceeded("the request's deadline passed")


RuleResult = tuple[list[Doc], list[AuditRecord]]


class Rule(Protocol):
    """The rule contract of seed 002 §16.1: a name, phases, applies(ctx), a pure call."""

    name: ClassVar[str]
    phases: ClassVar[frozenset[Phase]]
    Params: ClassVar[type[BaseModel]]
    optional: ClassVar[bool]
    phase: Phase

    def applies(self, ctx: Context) -> bool: ...

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult: ...


class BaseRule:
    """Shared constructor and an always-true `applies`; subclasses set name/phases/Params."""

    name: ClassVar[str]
    phases: ClassVar[frozenset[Phase]]
    Params: ClassVar[type[BaseModel]]
    # Optional: not started once the request's deadline has passed, and free to give up when
    # it passes midway (ctx.check_deadline); either way reported in `skipped`, page unchanged.
    optional: ClassVar[bool] = False

    def __init__(self, params: BaseModel, phase: Phase) -> None:
        self.params = params
        self.phase = phase

    def applies(self, ctx: Context) -> bool:
        return True

    def record(self, doc_id: str | None, action: str, reason: str,
               delta: float | int | None = None) -> AuditRecord:
        """An audit record stamped with this rule's name and phase."""
        return AuditRecord(self.name, self.phase, doc_id, action, reason, delta, APPLIED)

    # The rules find what they act on with one list comprehension over the page (no Python
    # call per document) and hand the few hits to these; a page nothing happened to is
    # returned as it came, which is most pages for most rules.

    def removing(self, docs: list[Doc], removals: list[tuple[int, str]]) -> RuleResult:
        """The page without docs[i] for each (i, reason), i ascending; one record each, and
        one for each document collapsed under it (`dropped`)."""
        if not removals:
            return docs, []
        kept = docs.copy()
        for i, _ in reversed(removals):
            del kept[i]
        records: list[AuditRecord] = []
        for i, reason in removals:
            self.dropped(records, docs[i], "remove", reason)
        return kept, records

    def dropped(self, records: list[AuditRecord], doc: Doc, action: str, reason: str) -> None:
        """Records for a document dropped from the page (`remove`, `trim`) and for each one
        collapsed under it, which goes with it: without its own record it would vanish from
        the response unexplained (a post-filter or a trim runs after diversify)."""
        name, phase = self.name, self.phase
        records.append(AuditRecord(name, phase, doc.id, action, reason, None, APPLIED))
        if doc.collapsed:
            verb = "trimmed" if action == "trim" else "removed"
            why = f"collapsed under {doc.id}, {verb} with it: {reason}"
            records.extend(AuditRecord(name, phase, c["id"], action, why, None, APPLIED)
                           for c in doc.collapsed)

    def rescoring(self, docs: list[Doc],
                  changes: list[tuple[int, float, float, str]]) -> RuleResult:
        """The page with docs[i] rescored for each (i, new score, delta, reason)."""
        if not changes:
            return docs, []
        out = docs.copy()
        name, phase = self.name, self.phase
        records = []
        for i, score, delta, reason in changes:
            doc = docs[i]
            out[i] = msgspec.structs.replace(doc, score=score)
            records.append(AuditRecord(name, phase, doc.id, "rescore", reason, delta, APPLIED))
        return out, records


@dataclass(frozen=True, slots=True)
class Step:
    """A configured rule in a phase, the experiment that gates it, and per-variant instances.

    `variants` holds the rule built with a treatment variant's parameter overrides (built at
    config load); a variant not in it runs `rule`. Control, outside and holdout shadow `rule`.
    """

    rule: Rule
    experiment: str | None = None
    variants: Mapping[str, Rule] = field(default_factory=dict)
    policy: StepPolicy = StepPolicy()  # reserved keys: on_error, enabled, validity window


class RuleTiming(msgspec.Struct, gc=False):
    """What the runner observed of one rule call, for metrics.

    A Struct, built in C: the runner makes one per rule call (a dataclass's generated
    __init__ cost ~0.5 us of Python each time). Its fields hold no reference back to it.
    """

    rule: str
    phase: Phase
    mode: str
    seconds: float
    records: Sequence[AuditRecord]
    moves: Sequence[int] = ()  # position changes (new − old) of the docs in the top 10 after it
    churn: int = 0             # docs in the top 10 after the rule that were not before it


ActionKey = tuple[str, Phase, str, str]  # (rule, phase, action, mode) of an audit record


@dataclass(frozen=True, slots=True)
class RuleError:
    """One failure of a rule on one request: for the error counter and the log line."""

    rule: str
    phase: Phase
    problem: str
    cause: BaseException


def problem_of(exc: BaseException) -> str:
    """The failure as the 503 body and the skipped list say it: a refused output by its
    message, anything else raised by its type and message."""
    if isinstance(exc, RefusedOutput):
        return f"returned output the runner refuses: {exc}"
    return f"raised {type(exc).__name__}: {exc}"


@dataclass(slots=True)
class Outcome:
    """The result of a run: final documents, every audit record, the fallback if any."""

    docs: list[Doc]
    audit: list[AuditRecord]
    fallback: dict[str, str] | None
    timings: list[RuleTiming]
    skipped: list[dict[str, str]] = field(default_factory=list)  # deadline, or failed open
    # The records of `audit` counted by ActionKey, as the runner made them (the metrics
    # need the counts; one tally per rule call beats keying every record again).
    actions: dict[ActionKey, int] = field(default_factory=dict)
    errors: list[RuleError] = field(default_factory=list)  # rules that failed, open or shadow


def emptied(count: int) -> str:
    """How every fallback record starts: the page the filters emptied."""
    return f"filters removed all {count} documents"


SORT_RULE = "sort"  # the runner's own name for the stable sort that closes `rerank`

# `skipped[].reason` of an optional rule: not started because the deadline had passed, or
# started and given up when it passed. Fixed strings: clients match on them, and they are
# the `reason` label of rearrange_rule_skipped_total (no request data in labels).
SKIPPED_LATE = "deadline"
STOPPED_LATE = "deadline (stopped while running)"
FAILED = "error"  # a rule that failed with `on_error: open`, or in shadow


_DISPLACED = "stable sort by score after rerank: displaced by rescored documents"


def sort_by_score(docs: list[Doc], ordered: list[Doc] | None = None
                  ) -> tuple[list[Doc], list[AuditRecord]]:
    """Stable sort by score, best first, with a `move` record for every doc that moved.

    `ordered` is `docs` already sorted (the runner keeps it from the last rerank rule).
    """
    if ordered is None:
        ordered = by_score(docs)
    records: list[AuditRecord] = []
    if ordered != docs:  # compares by identity first: an unmoved page costs no __eq__
        before = dict(zip(map(id, docs), range(len(docs)), strict=True))
        for after, doc in enumerate(ordered):
            delta = after - before[id(doc)]
            if delta:
                score = doc.score
                why = (_DISPLACED if score == doc.original_score else
                       f"stable sort by score after rerank: score {doc.original_score:g} -> "
                       f"{score:g}")
                records.append(AuditRecord(SORT_RULE, RERANK, doc.id, "move", why, delta,
                                           APPLIED))
    return ordered, records


class Pipeline:
    """An immutable, ordered list of steps per phase for one profile."""

    __slots__ = ("profile", "phases")

    def __init__(self, profile: str, phases: Sequence[tuple[Phase, Sequence[Step]]]) -> None:
        self.profile = profile
        self.phases = tuple((phase, tuple(steps)) for phase, steps in phases)

    def rules(self) -> list[tuple[Phase, Step]]:
        """Every (phase, step) in run order."""
        return [(phase, step) for phase, steps in self.phases for step in steps]

    def run(self, docs: list[Doc], ctx: Context) -> Outcome:
        """Run every phase in order; relax and rerun once if the fallback asks to.

        Rules are timed, and the deadline checked, on `ctx.clock`: the one the deadline is on.
        """
        outcome = self._run_once(docs, ctx)
        relax = next((r for r in outcome.audit if r.relax_to and r.mode == APPLIED), None)
        if relax is None:
            return outcome
        try:
            rerun = self.run(docs, replace(ctx, age_mode=relax.relax_to,
                                           relaxed_from=ctx.age_mode))
        except RuleFailed as exc:  # the first attempt's open failures are counted too
            exc.errors[:0] = outcome.errors
            raise
        fallback = rerun.fallback or {"rule": relax.rule, "action": "relax",
                                      "reason": relax.reason}
        # The first attempt's records describe a page nobody is shown: keep only the fallback.
        actions = dict(rerun.actions)
        _count(actions, (relax.rule, relax.phase, relax.action, relax.mode), 1)
        return Outcome(rerun.docs, [relax, *rerun.audit], fallback,
                       outcome.timings + rerun.timings, outcome.skipped + rerun.skipped,
                       actions, outcome.errors + rerun.errors)

    def _run_once(self, docs: list[Doc], ctx: Context) -> Outcome:
        clock = ctx.clock
        audit: list[AuditRecord] = []
        timings: list[RuleTiming] = []
        actions: dict[ActionKey, int] = {}
        fallback = None
        skipped: list[dict[str, str]] = []
        errors: list[RuleError] = []
        ranked: tuple[list[Doc], list[Doc]] | None = None  # (page, page by score) in rerank
        for phase, steps in self.phases:
            for step in steps:
                policy = step.policy
                if not policy.always and not policy.runs_at(ctx.now):
                    continue  # `enabled: false`, or outside valid_from..valid_until
                if step.experiment is None:  # most steps: not gated, applied as configured
                    mode, rule = APPLIED, step.rule
                else:
                    mode, rule = self._gated(step, ctx)
                if not rule.applies(ctx):
                    continue
                started = clock()
                if rule.optional and ctx.deadline is not None and started > ctx.deadline:
                    # The frontend's budget is spent: an optional rule is not worth the wait.
                    skipped.append({"rule": rule.name, "phase": phase, "reason": SKIPPED_LATE})
                    continue
                try:
                    out, records = rule(docs, ctx)
                except FieldError:  # bad input a rule found (a signature of the wrong k): 4xx
                    raise
                except Exception as exc:  # the failure policy decides; nothing is swallowed
                    # The page goes on as it came, with none of the rule's records, and its
                    # time still counts in the rule's duration (it was spent).
                    timings.append(RuleTiming(rule.name, phase, mode, clock() - started, ()))
                    if rule.optional and isinstance(exc, DeadlineExceeded):
                        skipped.append({"rule": rule.name, "phase": phase,
                                        "reason": STOPPED_LATE})
                        continue
                    error = RuleError(rule.name, phase, problem_of(exc), exc)
                    errors.append(error)
                    if mode == APPLIED and (policy.on_error or default_on_error(phase)) == CLOSED:
                        raise RuleFailed(rule.name, phase, error.problem, errors) from exc
                    skipped.append({"rule": rule.name, "phase": phase, "reason": FAILED})
                    continue
                elapsed = clock() - started
                timing = RuleTiming(rule.name, phase, mode, elapsed, records)
                if records and phase is RERANK:
                    # Sorted pages are kept along the phase, so each page is sorted once: a
                    # shadow rule's input is the next rule's input too.
                    if ranked is None or ranked[0] is not docs:
                        ranked = (docs, by_score(docs))
                    after = by_score(out)
                    timing.moves, timing.churn = compare_ranked(ranked[1], after)
                    if mode == APPLIED:
                        ranked = (out, after)
                elif records:
                    timing.moves, timing.churn = effect(docs, out, False)
                if mode == APPLIED:
                    docs = out
                else:  # shadow: the records say what it would have done; `out` is dropped
                    for rec in records:
                        rec.mode = SHADOW
                timings.append(timing)
                if records:
                    audit.extend(records)
                    _tally(actions, rule, mode, records)
            if phase is RERANK:
                docs, moves = sort_by_score(
                    docs, ranked[1] if ranked is not None and ranked[0] is docs else None)
                if moves:
                    audit.extend(moves)
                    _count(actions, (SORT_RULE, RERANK, "move", APPLIED), len(moves))
        if any(key[2] == "fallback" for key in actions):
            for rec in audit:
                if rec.action == "fallback" and rec.mode == APPLIED and not rec.relax_to:
                    fallback = {"rule": rec.rule, "action": "empty", "reason": rec.reason}
        if not docs and ctx.input_count and fallback is None and not _asks_relax(audit):
            # A profile without empty_result_fallback must still never return a silent empty page.
            reason = f"{emptied(ctx.input_count)}; nothing safe was found"
            rec = AuditRecord("pipeline", POST_FILTER, None, "fallback", reason, None,
                              APPLIED)
            audit.append(rec)
            _count(actions, ("pipeline", POST_FILTER, "fallback", APPLIED), 1)
            fallback = {"rule": "pipeline", "action": "empty", "reason": reason}
        return Outcome(docs, audit, fallback, timings, skipped, actions, errors)

    @staticmethod
    def _gated(step: Step, ctx: Context) -> tuple[str, Rule]:
        """A gated step's mode and rule: applied only in treatment variants, else shadow."""
        variant = ctx.variants.get(step.experiment)
        if variant is None or variant == CONTROL:
            return SHADOW, step.rule
        return APPLIED, step.variants.get(variant, step.rule)


_ACTION = attrgetter("action")


def _count(actions: dict[ActionKey, int], key: ActionKey, n: int) -> None:
    actions[key] = actions.get(key, 0) + n


def _tally(actions: dict[ActionKey, int], rule: Rule, mode: str,
           records: list[AuditRecord]) -> None:
    """Count one rule call's records; they carry its name and phase, and nearly always one
    action, which a set of them shows without building a Counter (~2 us a call)."""
    name, phase = rule.name, rule.phase
    kinds = set(map(_ACTION, records))
    if len(kinds) == 1:
        _count(actions, (name, phase, kinds.pop(), mode), len(records))
        return
    for action, n in Tally(map(_ACTION, records)).items():
        _count(actions, (name, phase, action, mode), n)


def _asks_relax(audit: list[AuditRecord]) -> bool:
    return any(r.relax_to and r.mode == APPLIED for r in audit)
