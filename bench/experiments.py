"""Benchmark: what experiments cost a request in the engine, as ratios measured in one run.

Three configs are built from config/rules.yaml:

  BARE  the sample profiles with no `experiments:` and without the two rules EXP gates;
  NONE  the sample profiles with no `experiments:` (every rule applied);
  EXP   the same profiles plus a 5 % holdout and two experiments sharing the layer
        `ranking` (spam_demotion in slots [0, 50), sandbox_damping with a parameter
        override in slots [50, 100)), so a request pays for the holdout hash, the layer
        hash and the variant hashes.

Each is served by its own `Rearranger` from `build_services` (the real request path minus
HTTP: one call into the engine, which decodes, assigns, runs the pipeline, counts the
metrics and writes the response and, with an audit log, the audit line). One generated
100-document page is sent as three users: one in antispam_v7's control (spam_demotion
runs in shadow, and so does sandbox_damping, whose slots the user is outside), one in its
treatment (spam_demotion applied), and one in the holdout (both rules in shadow).
Measured interleaved (every round calls each once, the order rotated):

  (0) BARE, the control user's page      no gated rules at all
  (1) NONE, the control user's page      the baseline: both rules applied, no assignment
  (2) EXP, control user                  (2)/(1): assignment + both rules in shadow
  (3) EXP, treatment user                (3)/(1): assignment, spam_demotion applied
  (4) EXP, holdout user                  (4)/(1): the holdout (both rules in shadow)
  (5) EXP, control user, audit log on    (5)/(2): the audit line every exposure writes
  (6) NONE, audit log on                 (6)/(1): the audit line without exposures

The engine counts its metrics on every request (they cannot be switched off), so every
figure includes them. Only ratios within one run are comparable; the µs are context.
Nothing here asserts a time.

Run from the repository root: `python -m bench.experiments [--iterations 2000] [--size 100]`.
"""
from __future__ import annotations

import argparse
import gc
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson

from app.api.services import build_services
from app.config.settings import Settings
from app.engine.service import Rearranger
from app.experiments.bucketing import bucket
from app.observability.metrics import Metrics
from bench.pages import make_serp
from bench.pipeline import CONFIG, Measured, Stats, run_interleaved

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
GATED = ("spam_demotion", "sandbox_damping")


def configs() -> tuple[bytes, bytes, bytes]:
    """(BARE, NONE, EXP) YAML: the sample without the experiments' rules at all, without
    experiments, and with the experiments above."""
    sample = CONFIG.read_bytes()
    none = re.sub(rb"(?ms)^experiments:.*\Z", b"", sample)
    bare = re.sub(rb"(?m)^ +- \{(spam_demotion|sandbox_damping):.*\n", b"", none)
    bare = bare.replace(b"[anti_seo_reset, spam_demotion, quarantine_demotion, sandbox_damping]",
                        b"[anti_seo_reset, quarantine_demotion]")
    return bare, none, none + EXPERIMENTS


def pick_user(where: str) -> str:
    """A user in the holdout, or outside it in antispam_v7's slots and in `where` of it."""
    for i in range(100_000):
        user = f"u-{i:06d}"
        held = bucket("holdout", user) < 500
        if where == "holdout":
            if held:
                return user
            continue
        if held or bucket("ranking", user) >= 5000:
            continue
        if ("control" if bucket("antispam_v7", user) < 5000 else "treatment") == where:
            return user
    raise SystemExit(f"no user found in {where}")


def service_for(config: bytes, tmp: Path, name: str, audit: bool = False) -> Rearranger:
    """The service as `rearrange run` builds it (no banlist file), with an audit log in
    `tmp` if `audit`."""
    path = tmp / f"{name}.yaml"
    path.write_bytes(config)
    settings = Settings(config=path, redis_url=None, admin_tokens="", banlist_seed=None,
                        audit_log=str(tmp / f"{name}.audit.jsonl") if audit else None,
                        ).model_copy(update={"banlist_path": None})
    return build_services(settings, Metrics()).rearranger


def served(service: Rearranger, body: bytes) -> dict:
    status, out = service.rerank(body)
    if status != 200:
        raise SystemExit(f"the page was refused ({status}): {out[:300]!r}")
    return orjson.loads(out)


def gated_modes(response: dict) -> dict[str, str]:
    """How each gated rule that acted ran: rule → applied | shadow."""
    return {r["rule"]: r["mode"] for r in response["audit"] if r["rule"] in GATED}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.experiments",
                                     description=__doc__.split("\n", 1)[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--size", type=int, default=100, help="documents on the page")
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)
    bare_yaml, none_yaml, exp_yaml = configs()
    users = {where: pick_user(where) for where in ("control", "treatment", "holdout")}
    body = {where: orjson.dumps(make_serp(args.size, args.seed, user, False))
            for where, user in users.items()}
    with tempfile.TemporaryDirectory(prefix="rearrange-bench-") as tmp:
        services = {
            "bare": service_for(bare_yaml, Path(tmp), "bare"),
            "none": service_for(none_yaml, Path(tmp), "none"),
            "exp": service_for(exp_yaml, Path(tmp), "exp"),
            "exp+audit": service_for(exp_yaml, Path(tmp), "exp-audit", audit=True),
            "none+audit": service_for(none_yaml, Path(tmp), "none-audit", audit=True),
        }
        shown = {where: served(services["exp"], body[where]) for where in body}
        profile = shown["control"]["profile"]
        assert shown["holdout"]["experiments"][0]["experiment"] == "holdout"
        assert gated_modes(served(services["none"], body["control"])) == dict.fromkeys(
            GATED, "applied")
        assert not gated_modes(served(services["bare"], body["control"]))

        def call(service: str, where: str) -> Callable[[], object]:
            return lambda: services[service].rerank(body[where])

        measured = [
            Measured("(0) BARE", call("bare", "control")),
            Measured("(1) NONE", call("none", "control")),
            Measured("(2) EXP control", call("exp", "control")),
            Measured("(3) EXP treatment", call("exp", "treatment")),
            Measured("(4) EXP holdout", call("exp", "holdout")),
            Measured("(5) EXP control + audit log", call("exp+audit", "control")),
            Measured("(6) NONE + audit log", call("none+audit", "control")),
        ]
        gc.collect()
        gc.freeze()
        run_interleaved(measured, args.iterations, args.warmup)
        for name in ("exp+audit", "none+audit"):
            services[name].audit_log.close()
    stats = {m.label: Stats.of(m.samples) for m in measured}
    med = {m.label[:3]: stats[m.label].median_us for m in measured}
    print(f"python {sys.version.split()[0]}; {args.size} documents, profile {profile}; "
          f"{args.iterations} calls each, interleaved")
    for where, response in shown.items():
        print(f"{where} user {users[where]}: gated rules that acted "
              f"{gated_modes(response) or 'none'}")
    print(f"{'measured':<32}{'median µs':>11}{'p99 µs':>10}{'x (1)':>8}")
    for label, s in stats.items():
        print(f"{label:<32}{s.median_us:>11.1f}{s.p99_us:>10.1f}"
              f"{s.median_us / med['(1)']:>8.2f}")
    print("\nratios of medians:")
    lines = [
        ("experiments, control (assignment + both rules in shadow)", "(2)/(1)"),
        ("computing the gated rules in shadow, vs not having them", "(2)/(0)"),
        ("experiments, treatment (spam_demotion applied)", "(3)/(1)"),
        ("the holdout (both rules in shadow)", "(4)/(1)"),
        ("the audit line of a request with exposures", "(5)/(2)"),
        ("the audit line of a request without experiments", "(6)/(1)"),
    ]
    for what, formula in lines:
        over, under = formula.split("/")
        print(f"  {what:<58}{formula:>9} = {med[over] / med[under]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
