"""Benchmark: what experiments and metrics cost a request, as ratios measured in one run.

Two configs are built from config/rules.yaml:

  NONE  the sample profiles with no `experiments:` (every rule applied);
  EXP   the same profiles plus a 5 % holdout and two experiments sharing the layer
        `ranking` (spam_demotion in slots [0, 50), sandbox_damping with a parameter
        override in slots [50, 100)), so a request pays for the holdout hash, the layer
        hash and the variant hashes.

The user id is chosen so EXP puts the request in antispam_v7's control: spam_demotion runs
in shadow, and sandbox_damping (the unit is outside its slots) too. Measured, interleaved
(every round calls each function once, order rotated), on one generated 100-document page:

  (1) NONE: Context + Pipeline.run                         the baseline
  (2) EXP, control: assign + Context + Pipeline.run        (2)/(1): assignment + shadow runs
  (3) EXP, treatment: assign + Context + Pipeline.run      (3)/(1): assignment, rules applied
  (4) NONE: (1) + Metrics.observe(outcome)                 (4)/(1): metrics on a request
  (5) EXP, control: (2) + Metrics.assigned + observe       (5)/(2): metrics with shadow series
  (6) NONE: Rearranger.rerank(body), the whole request minus HTTP
  (7) EXP, control: Rearranger.rerank(body)                (7)/(6): experiments end to end

`Pipeline.run` itself includes the per-rule position/churn bookkeeping (`effect`) of every
rule call that produced records; (8) replays the rules of (2) with those `effect` calls and
(9) without them, so ((8) - (9)) / (1) is that bookkeeping's share of a run. (0) is NONE
without the two gated rules at all, so (2)/(0) is what computing them in shadow costs.
Only ratios within one run are comparable; the µs are context. Nothing here asserts a time.

Run from the repository root: `python -m bench.experiments [--iterations 2000] [--size 100]`.
"""
from __future__ import annotations

import argparse
import gc
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import orjson

from app import contract
from app.config import Engine, load_bytes
from app.effects import by_score, compare_ranked, effect
from app.experiments import assign, bucket
from app.main import build_service
from app.metrics import Metrics
from app.pipeline import Context, Phase
from app.service import Rearranger
from app.settings import Settings
from bench.pipeline import CONFIG, Measured, Stats, make_serp, run_interleaved

EXPERIMENTS = b"""
holdout: {unit: user_id, percent: 5}
experiments:
  - name: antispam_v7
    unit: user_id
    layer: ranking
    slots: [0, 50]
    variants: {control: 50, treatment: 50}
    rules: [spam_demotion]
  - name: sandbox_v2
    unit: user_id
    layer: ranking
    slots: [50, 100]
    variants:
      control: 50
      strong: {weight: 50, params: {sandbox_damping: {beta: 0.9}}}
    rules: [sandbox_damping]
"""


def configs() -> tuple[bytes, bytes, bytes]:
    """(NONE, EXP, BARE) YAML: the sample without and with the experiments above, and
    without the experiments' rules at all."""
    sample = CONFIG.read_bytes()
    none = re.sub(rb"(?ms)^experiments:.*\Z", b"", sample)
    bare = re.sub(rb"(?m)^ +- \{(spam_demotion|sandbox_damping):.*\n", b"", none)
    bare = bare.replace(b"[anti_seo_reset, spam_demotion, sandbox_damping]", b"[anti_seo_reset]")
    return none, none + EXPERIMENTS, bare


def pick_user(variant: str) -> str:
    """A user outside the holdout, in antispam_v7's slots, in `variant` of it."""
    for i in range(100_000):
        u = f"u-{i:06d}"
        if bucket("holdout", u) < 500 or bucket("ranking", u) >= 5000:
            continue
        if ("control" if bucket("antispam_v7", u) < 5000 else "treatment") == variant:
            return u
    raise SystemExit(f"no user found in {variant}")


def service_for(config: bytes, tmp: Path, name: str) -> Rearranger:
    path = tmp / f"{name}.yaml"
    path.write_bytes(config)
    settings = Settings(config=path, audit_log=None, redis_url=None, admin_tokens="",
                        banlist_seed=None).model_copy(update={"banlist_path": None})
    return build_service(settings, Metrics())


def context(engine: Engine, req: contract.RerankRequest, n: int, service: Rearranger):
    """Assignment and Context exactly as Rearranger.rerank builds them."""
    assigned = assign(engine.experiments, engine.holdout, req.unit)
    q = req.query
    ctx = Context(query_text=q.text, classes=tuple(q.classes),
                  region=q.region.upper() if q.region else None, age_mode=q.age_mode,
                  depth=req.depth, input_count=n, now=time.time(), banlist=service.store.index,
                  variants=assigned.variants)
    return ctx, assigned


def replay_effects(engine: Engine, profile: str, docs: list, ctx: Context,
                   with_effect: bool = True) -> int:
    """Rerun the rules as the runner does, with (or without) its effect bookkeeping."""
    calls = 0
    ranked = None
    for phase, steps in engine.profiles[profile].phases:
        for step in steps:
            out, records = step.rule(docs, ctx)
            applied = step.experiment is None
            if records and with_effect:
                if phase is Phase.RERANK:
                    before = ranked[1] if ranked is not None and ranked[0] is docs else None
                    after = by_score(out)
                    compare_ranked(before if before is not None else by_score(docs), after)
                    if applied:
                        ranked = (out, after)
                else:
                    effect(docs, out, False)
            calls += bool(records)
            if applied:
                docs = out
        if phase is Phase.RERANK:
            cached = ranked[1] if with_effect and ranked and ranked[0] is docs else None
            docs = cached if cached is not None else by_score(docs)
    return calls


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.experiments",
                                     description=__doc__.split("\n", 1)[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--size", type=int, default=100, help="documents on the page")
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)
    none_yaml, exp_yaml, bare_yaml = configs()
    control_user, treated_user = pick_user("control"), pick_user("treatment")
    body_c = orjson.dumps(make_serp(args.size, args.seed, control_user, False))
    body_t = orjson.dumps(make_serp(args.size, args.seed, treated_user, False))
    with tempfile.TemporaryDirectory(prefix="rearrange-bench-") as tmp:
        svc_none = service_for(none_yaml, Path(tmp), "none")
        svc_exp = service_for(exp_yaml, Path(tmp), "exp")
    none, exp, bare = load_bytes(none_yaml), load_bytes(exp_yaml), load_bytes(bare_yaml)
    req_c, req_t = contract.decode(body_c), contract.decode(body_t)
    limits = (svc_none.settings.max_documents, svc_none.settings.max_text_chars)
    docs = contract.to_docs(req_c, *limits)
    profile = none.route(tuple(req_c.query.classes))
    p_none, p_exp, p_bare = none.profiles[profile], exp.profiles[profile], bare.profiles[profile]
    assert not {s.rule.name for _, s in p_bare.rules()} & {"spam_demotion", "sandbox_damping"}
    n = len(docs)
    metrics = Metrics()

    def baseline():
        return p_none.run(docs, context(none, req_c, n, svc_none)[0])

    def exp_run(req):
        return p_exp.run(docs, context(exp, req, n, svc_exp)[0])

    def with_metrics():
        started = time.perf_counter()
        outcome = baseline()
        metrics.observe(profile, outcome, time.perf_counter() - started)

    def exp_with_metrics():
        started = time.perf_counter()
        ctx, assigned = context(exp, req_c, n, svc_exp)
        outcome = p_exp.run(docs, ctx)
        metrics.assigned(assigned.counted)
        metrics.observe(profile, outcome, time.perf_counter() - started)

    ctx_c = context(exp, req_c, n, svc_exp)[0]
    effect_calls = replay_effects(exp, profile, docs, ctx_c)
    shadowed = sorted({t.rule for t in exp_run(req_c).timings if t.mode == "shadow"})
    applied_t = sorted({t.rule for t in exp_run(req_t).timings
                        if t.rule in ("spam_demotion", "sandbox_damping")})
    measured = [
        Measured("(0) BARE run (no gated rules)",
                 lambda: p_bare.run(docs, context(bare, req_c, n, svc_none)[0])),
        Measured("(1) NONE run", baseline),
        Measured("(2) EXP control: assign + run", lambda: exp_run(req_c)),
        Measured("(3) EXP treatment: assign + run", lambda: exp_run(req_t)),
        Measured("(4) NONE run + metrics", with_metrics),
        Measured("(5) EXP control run + metrics", exp_with_metrics),
        Measured("(6) NONE rerank(body)", lambda: svc_none.rerank(body_c)),
        Measured("(7) EXP control rerank(body)", lambda: svc_exp.rerank(body_c)),
        Measured(f"(8) rules + effect() x{effect_calls}",
                 lambda: replay_effects(exp, profile, docs, ctx_c)),
        Measured("(9) rules alone", lambda: replay_effects(exp, profile, docs, ctx_c, False)),
    ]
    gc.collect()
    gc.freeze()
    run_interleaved(measured, args.iterations, args.warmup)
    stats = {m.label: Stats.of(m.samples) for m in measured}
    base = stats[measured[1].label].median_us
    print(f"python {sys.version.split()[0]}; {args.size} documents, profile {profile}; "
          f"{args.iterations} calls each, interleaved")
    print(f"control user {control_user}: shadowed {shadowed}; treatment user {treated_user}")
    print(f"{'measured':<36}{'median µs':>11}{'p99 µs':>10}{'x (1)':>8}")
    for label, s in stats.items():
        print(f"{label:<36}{s.median_us:>11.1f}{s.p99_us:>10.1f}{s.median_us / base:>8.2f}")
    med = {m.label[:3]: stats[m.label].median_us for m in measured}
    print("\nratios of medians:")
    lines = [
        ("experiments, control (assignment + shadow runs)", "(2)/(1)", med["(2)"] / med["(1)"]),
        ("computing the gated rules in shadow", "(2)/(0)", med["(2)"] / med["(0)"]),
        (f"experiments, treatment ({', '.join(applied_t)} applied)", "(3)/(1)",
         med["(3)"] / med["(1)"]),
        ("metrics on a request", "(4)/(1)", med["(4)"] / med["(1)"]),
        ("metrics with experiments and shadow series", "(5)/(2)", med["(5)"] / med["(2)"]),
        ("metrics as a share of the whole request", "((4)-(1))/(6)",
         (med["(4)"] - med["(1)"]) / med["(6)"]),
        ("experiments on the whole request (minus HTTP)", "(7)/(6)", med["(7)"] / med["(6)"]),
        ("per-rule position/churn bookkeeping", "((8)-(9))/(1)",
         (med["(8)"] - med["(9)"]) / med["(1)"]),
    ]
    for what, formula, ratio in lines:
        print(f"  {what:<58}{formula:>14} = {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
