"""The phased rule pipeline: documents, context, audit records and the runner."""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel


class Phase(StrEnum):
    """The six phases, in the order they run."""

    PRE_FILTER = "pre-filter"
    RERANK = "rerank"
    DIVERSIFY = "diversify"
    TRIM = "trim"
    ANNOTATE = "annotate"
    POST_FILTER = "post-filter"


PHASES: tuple[Phase, ...] = tuple(Phase)
AGE_MODES: tuple[str, ...] = ("strict", "moderate", "off")  # strictest first
APPLIED, SHADOW = "applied", "shadow"


class Doc:
    """One result of the page; rules never mutate a Doc, they build changed copies."""

    __slots__ = (
        "id", "url", "canonical", "host", "score", "original_score", "original_position",
        "factors", "spam_score", "adult_score", "domain_age_days", "is_ad", "topics",
        "blocked_regions", "text", "signature", "attributes", "annotations", "collapsed",
    )

    def __init__(
        self, id: str, url: str, score: float, *, canonical: str = "", host: str = "",
        original_score: float | None = None, original_position: int = 0,
        factors: dict[str, float] | None = None, spam_score: float = 0.0,
        adult_score: float = 0.0, domain_age_days: float | None = None, is_ad: bool = False,
        topics: Sequence[str] = (), blocked_regions: frozenset[str] = frozenset(),
        text: str | None = None, signature: Any = None,
        attributes: dict[str, Any] | None = None, annotations: tuple[str, ...] = (),
        collapsed: tuple[dict[str, str], ...] = (),
    ) -> None:
        # Plain assignments: a loop over __slots__ with setattr was 4x slower (bench/pipeline.py).
        self.id = id
        self.url = url
        self.canonical = canonical
        self.host = host
        self.score = score
        self.original_score = score if original_score is None else original_score
        self.original_position = original_position
        self.factors = _EMPTY if factors is None else factors
        self.spam_score = spam_score
        self.adult_score = adult_score
        self.domain_age_days = domain_age_days
        self.is_ad = is_ad
        self.topics = topics
        self.blocked_regions = blocked_regions
        self.text = text
        self.signature = signature
        self.attributes = _EMPTY if attributes is None else attributes
        self.annotations = annotations
        self.collapsed = collapsed

    def replace(self, **changes: Any) -> Doc:
        """A copy with some fields changed; rules call it instead of mutating."""
        new = object.__new__(Doc)
        new.id = self.id
        new.url = self.url
        new.canonical = self.canonical
        new.host = self.host
        new.score = self.score
        new.original_score = self.original_score
        new.original_position = self.original_position
        new.factors = self.factors
        new.spam_score = self.spam_score
        new.adult_score = self.adult_score
        new.domain_age_days = self.domain_age_days
        new.is_ad = self.is_ad
        new.topics = self.topics
        new.blocked_regions = self.blocked_regions
        new.text = self.text
        new.signature = self.signature
        new.attributes = self.attributes
        new.annotations = self.annotations
        new.collapsed = self.collapsed
        for name, value in changes.items():
            setattr(new, name, value)
        return new

    def __repr__(self) -> str:
        return f"Doc({self.id!r}, score={self.score!r})"


_EMPTY: dict[str, Any] = {}  # shared, never mutated: rules build new dicts, not edit these



class AuditRecord:
    """One thing a rule did (or would have done, in shadow) to one document."""

    __slots__ = ("rule", "phase", "doc_id", "action", "reason", "delta", "mode", "relax_to")

    def __init__(
        self, rule: str, phase: Phase, doc_id: str | None, action: str, reason: str,
        delta: float | int | None = None, relax_to: str | None = None,
    ) -> None:
        self.rule = rule
        self.phase = phase
        self.doc_id = doc_id
        self.action = action
        self.reason = reason
        self.delta = delta
        self.mode = APPLIED
        self.relax_to = relax_to  # only for `fallback`: the milder age mode to rerun with

    def as_dict(self) -> dict[str, Any]:
        """The record as the CONTRACT's JSON object."""
        return {
            # phase is a StrEnum: it encodes as its value, without Enum's slow .value lookup
            "rule": self.rule, "phase": self.phase, "doc_id": self.doc_id,
            "action": self.action, "reason": self.reason, "delta": self.delta,
            "mode": self.mode,
        }


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


RuleResult = tuple[list[Doc], list[AuditRecord]]


class Rule(Protocol):
    """The rule contract of seed 002 §16.1: a name, phases, applies(ctx), a pure call."""

    name: ClassVar[str]
    phases: ClassVar[frozenset[Phase]]
    Params: ClassVar[type[BaseModel]]
    phase: Phase

    def applies(self, ctx: Context) -> bool: ...

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult: ...


class BaseRule:
    """Shared constructor and an always-true `applies`; subclasses set name/phases/Params."""

    name: ClassVar[str]
    phases: ClassVar[frozenset[Phase]]
    Params: ClassVar[type[BaseModel]]

    def __init__(self, params: BaseModel, phase: Phase) -> None:
        self.params = params
        self.phase = phase

    def applies(self, ctx: Context) -> bool:
        return True

    def record(self, doc_id: str | None, action: str, reason: str,
               delta: float | int | None = None) -> AuditRecord:
        """An audit record stamped with this rule's name and phase."""
        return AuditRecord(self.name, self.phase, doc_id, action, reason, delta)


@dataclass(frozen=True, slots=True)
class Step:
    """A configured rule in a phase, and the experiment that gates it, if any."""

    rule: Rule
    experiment: str | None = None


@dataclass(slots=True)
class RuleTiming:
    """What the runner observed of one rule call, for metrics."""

    rule: str
    phase: Phase
    mode: str
    seconds: float
    records: Sequence[AuditRecord]


@dataclass(slots=True)
class Outcome:
    """The result of a run: final documents, every audit record, the fallback if any."""

    docs: list[Doc]
    audit: list[AuditRecord]
    fallback: dict[str, str] | None
    timings: list[RuleTiming]


SORT_RULE = "sort"  # the runner's own name for the stable sort that closes `rerank`


def sort_by_score(docs: list[Doc]) -> tuple[list[Doc], list[AuditRecord]]:
    """Stable sort by score, best first, with a `move` record for every doc that moved."""
    ordered = sorted(docs, key=_score, reverse=True)  # reverse=True keeps ties in order
    records = []
    if ordered != docs:
        before = {id(d): i for i, d in enumerate(docs)}
        for after, doc in enumerate(ordered):
            delta = after - before[id(doc)]
            if delta:
                why = (f"score {doc.original_score:g} -> {doc.score:g}"
                       if doc.score != doc.original_score else "displaced by rescored documents")
                records.append(AuditRecord(SORT_RULE, Phase.RERANK, doc.id, "move",
                                           f"stable sort by score after rerank: {why}", delta))
    return ordered, records


def _score(doc: Doc) -> float:
    return doc.score


class Pipeline:
    """An immutable, ordered list of steps per phase for one profile."""

    __slots__ = ("profile", "phases")

    def __init__(self, profile: str, phases: Sequence[tuple[Phase, Sequence[Step]]]) -> None:
        self.profile = profile
        self.phases = tuple((phase, tuple(steps)) for phase, steps in phases)

    def rules(self) -> list[tuple[Phase, Step]]:
        """Every (phase, step) in run order."""
        return [(phase, step) for phase, steps in self.phases for step in steps]

    def run(self, docs: list[Doc], ctx: Context,
            clock: Callable[[], float] = time.perf_counter) -> Outcome:
        """Run every phase in order; relax and rerun once if the fallback asks to."""
        outcome = self._run_once(docs, ctx, clock)
        relax = next((r for r in outcome.audit if r.relax_to and r.mode == APPLIED), None)
        if relax is None:
            return outcome
        rerun = self.run(docs, replace(ctx, age_mode=relax.relax_to, relaxed_from=ctx.age_mode),
                         clock)
        fallback = rerun.fallback or {"rule": relax.rule, "action": "relax",
                                      "reason": relax.reason}
        # The first attempt's records describe a page nobody is shown: keep only the fallback.
        return Outcome(rerun.docs, [relax, *rerun.audit], fallback,
                       outcome.timings + rerun.timings)

    def _run_once(self, docs: list[Doc], ctx: Context, clock: Callable[[], float]) -> Outcome:
        audit: list[AuditRecord] = []
        timings: list[RuleTiming] = []
        fallback = None
        for phase, steps in self.phases:
            for step in steps:
                rule = step.rule
                if not rule.applies(ctx):
                    continue
                started = clock()
                out, records = rule(docs, ctx)
                mode = self._mode(step, ctx)
                if mode == APPLIED:
                    docs = out
                else:
                    for rec in records:
                        rec.mode = SHADOW
                timings.append(RuleTiming(rule.name, phase, mode, clock() - started, records))
                audit.extend(records)
            if phase is Phase.RERANK:
                docs, moves = sort_by_score(docs)
                audit.extend(moves)
        for rec in audit:
            if rec.action == "fallback" and rec.mode == APPLIED and not rec.relax_to:
                fallback = {"rule": rec.rule, "action": "empty", "reason": rec.reason}
        if not docs and ctx.input_count and fallback is None and not _asks_relax(audit):
            # A profile without empty_result_fallback must still never return a silent empty page.
            reason = f"filters removed all {ctx.input_count} documents; nothing safe was found"
            rec = AuditRecord("pipeline", Phase.POST_FILTER, None, "fallback", reason)
            audit.append(rec)
            fallback = {"rule": "pipeline", "action": "empty", "reason": reason}
        return Outcome(docs, audit, fallback, timings)

    @staticmethod
    def _mode(step: Step, ctx: Context) -> str:
        if step.experiment is None:
            return APPLIED
        variant = ctx.variants.get(step.experiment)
        return APPLIED if variant is not None and variant != "control" else SHADOW


def _asks_relax(audit: list[AuditRecord]) -> bool:
    return any(r.relax_to and r.mode == APPLIED for r in audit)
