"""The request path: decode, route, assign experiments, run the pipeline, build the response."""
from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from app import contract
from app.audit import AuditLog
from app.banlist.base import BanStore
from app.config import ConfigHolder
from app.errors import FieldError, RuleFailed
from app.experiments import Experiment, assign
from app.metrics import Metrics
from app.pipeline import APPLIED, Context, Doc, Outcome, RuleError
from app.settings import Settings

_REMOVING = frozenset({"remove", "trim"})
FORCE_HEADER = "X-Rearrange-Force-Variant"  # QA: `experiment=variant[, ...]`, admin token only
log = logging.getLogger("rearrange.rules")


class FailureLog:
    """One log line per (rule, phase) per `interval` seconds, with the cause and how many
    failures the quiet time held: a rule failing on every request must not flood the log."""

    def __init__(self, interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # → (logged at, held back)
        self._lock = threading.Lock()

    def failed(self, profile: str, error: RuleError, closed: bool) -> None:
        """Log this failure, or count it until the rule's next line is due."""
        key, now = (error.rule, str(error.phase)), self.clock()
        with self._lock:
            logged, held = self._last.get(key, (None, 0))
            if logged is not None and now - logged < self.interval:
                self._last[key] = (logged, held + 1)
                return
            self._last[key] = (now, 0)
        since = f" ({held} more since the last line)" if held else ""
        log.error("rule %s in %s (profile %s) failed, %s: %s%s", error.rule, error.phase,
                  profile, "request answered 503" if closed else "page served without it",
                  error.problem, since, exc_info=error.cause)


class Rearranger:
    """Serves /v1/rerank (and `rearrange run`); holds no per-request state of its own."""

    def __init__(self, settings: Settings, store: BanStore, config: ConfigHolder,
                 metrics: Metrics, audit_log: AuditLog | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.settings = settings
        # Arrival, the deadline, rule timings and latency are all read on this one clock.
        self.clock = clock
        self.store = store
        self.config = config
        self.metrics = metrics
        self.audit_log = audit_log
        self.quarantine: BanStore | None = None  # set by build_service with sanctions
        self.sanctions: Any = None
        self.draining = False  # set on shutdown so /readyz turns false before the last request
        self.failures = FailureLog()

    def rerank(self, body: bytes, forced: Mapping[str, str] | None = None,
               forced_by: str | None = None, arrived: float | None = None) -> dict[str, Any]:
        """Handle one request body; FieldError for bad input.

        `forced` (experiment → variant, from the QA header, the caller having checked the
        admin token of `forced_by`) overrides the bucketing for this request only.
        """
        clock = self.clock
        started = clock() if arrived is None else arrived
        req = contract.decode(body)
        engine = self.config.engine  # one reference for the whole request, even across a reload
        if req.profile is not None:
            if req.profile not in engine.profiles:
                raise FieldError("profile", f"unknown profile {req.profile!r} "
                                 f"(known: {', '.join(sorted(engine.profiles))})")
            profile = req.profile
        else:
            profile = engine.route(tuple(req.query.classes))
        docs = contract.to_docs(req, self.settings.max_documents, self.settings.max_text_chars)
        if forced:
            _check_forced(engine.experiments, forced)
        assigned = assign(engine.experiments, engine.holdout, req.unit, forced)
        assignments = assigned.exposures
        store = self.store
        q = req.query
        # Read together, before the run: the version reported is the one that was matched
        # (a replica thread may apply a change while the pipeline runs).
        banlist, banlist_version = store.index, store.version
        ctx = Context(
            query_text=q.text, classes=tuple(q.classes),
            region=q.region.upper() if q.region else None, age_mode=q.age_mode,
            depth=req.depth, input_count=len(docs), now=time.time(), banlist=banlist,
            variants=assigned.variants,
            quarantine=self.quarantine.index if self.quarantine is not None else None,
            deadline=started + self.settings.deadline_ms / 1000 if self.settings.deadline_ms
            else None,
            clock=clock, query=q,
        )
        try:
            outcome = engine.profiles[profile].run(docs, ctx)
        except RuleFailed as exc:  # a closed rule failed: no page (the API answers 503)
            self._failed(profile, exc.errors, closed=True)
            raise
        if outcome.errors:
            self._failed(profile, outcome.errors, closed=False)
        response = {
            "request_id": req.request_id or uuid.uuid4().hex,
            "profile": profile,
            "config_version": engine.version,
            "banlist_version": banlist_version,
            "experiments": assignments,
            "documents": [_doc_out(i, d) for i, d in enumerate(outcome.docs, 1)],
            "removed": _removed(outcome),
            "fallback": outcome.fallback,
            "audit": outcome.audit,  # AuditRecord Structs: msgspec encodes them as objects
        }
        if outcome.skipped:  # an addition to the contract: optional rules cut by the deadline
            response["skipped"] = outcome.skipped
        if assigned.counted:
            self.metrics.assigned(assigned.counted)
        self.metrics.observe(profile, outcome, clock() - started)
        if self.audit_log is not None and (outcome.audit or assignments or outcome.skipped):
            # Every exposure is logged, not only requests that changed something: analysts
            # join on what was served instead of recomputing buckets. A skipped rule is
            # logged too: the page served is not what the profile says it would be.
            line = {
                "ts": ctx.now, "request_id": response["request_id"], "profile": profile,
                "config_version": engine.version, "banlist_version": banlist_version,
                "experiments": assignments, "query": {"text": q.text, "region": ctx.region},
                "audit": response["audit"],
            }
            if outcome.skipped:
                line["skipped"] = outcome.skipped
            if forced_by is not None:
                line["forced_by"] = forced_by
            self.audit_log.emit(line)
        return response


    def _failed(self, profile: str, errors: list[RuleError], closed: bool) -> None:
        self.metrics.rule_failed(profile, errors, closed)
        for i, error in enumerate(errors):
            self.failures.failed(profile, error, closed and i == len(errors) - 1)


def _check_forced(experiments: tuple[Experiment, ...], forced: Mapping[str, str]) -> None:
    by_name = {e.name: e for e in experiments}
    layers: dict[str, str] = {}
    for name, variant in forced.items():
        exp = by_name.get(name)
        if exp is None:
            raise FieldError(FORCE_HEADER, f"unknown experiment {name!r} "
                             f"(running: {', '.join(by_name) or 'none'})")
        known = [v for v, _ in exp.variants]
        if variant not in known:
            raise FieldError(FORCE_HEADER, f"experiment {name} has no variant {variant!r} "
                             f"(variants: {', '.join(known)})")
        if exp.layer is not None:
            if exp.layer in layers:
                raise FieldError(FORCE_HEADER, f"{layers[exp.layer]} and {name} share layer "
                                 f"{exp.layer}: a request is in one experiment per layer")
            layers[exp.layer] = name


def _doc_out(position: int, d: Doc) -> dict[str, Any]:
    return {
        "id": d.id, "url": d.url, "position": position,
        "original_position": d.original_position, "score": d.score,
        "original_score": d.original_score, "annotations": list(d.annotations),
        "collapsed": list(d.collapsed), "attributes": d.attributes,
    }


def _removed(outcome: Outcome) -> list[dict[str, Any]]:
    return [
        {"id": r.doc_id, "rule": r.rule, "phase": r.phase, "action": r.action,
         "reason": r.reason}
        for r in outcome.audit if r.action in _REMOVING and r.mode == APPLIED
    ]
