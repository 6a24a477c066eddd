"""`rearrange serve | check-config FILE | run REQUEST.json | replay CAPTURED.jsonl |
experiments srm | dupes PAGES | banlist … | audit search | config show|versions|rollback`."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec
import orjson

from app import __version__
from app.cli import audit as audit_cli
from app.cli import banlist as cli_banlist
from app.cli import config as cli_config
from app.cli import replay as replay_cli
from app.cli.dupes import add_dupes_arguments
from app.errors import ConfigError, FieldError, RearrangeError, SettingsError


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rearrange` console script."""
    parser = argparse.ArgumentParser(prog="rearrange", description=__doc__)
    parser.add_argument("--version", action="version", version=f"rearrange {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP service (settings from the environment)")
    serve.add_argument("--host", help="listen address (default REARRANGE_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default REARRANGE_PORT or 8080)")
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    check = sub.add_parser("check-config", help="validate a rules file the way the service does")
    check.add_argument("file", type=Path)
    check.add_argument("--against", type=Path, metavar="OLD",
                       help="also refuse what a reload from OLD would refuse: changes that "
                       "re-bucket units of OLD's running experiments")
    run = sub.add_parser("run", help="run the pipeline offline on a request body, print the "
                         "response")
    run.add_argument("request", type=Path, help="a JSON request body ('-' for stdin)")
    run.add_argument("--config", type=Path, help="rules file (default REARRANGE_CONFIG)")
    run.add_argument("--banlist", type=Path,
                     help="banlist to apply: an export (NDJSON or CSV, groups included) or "
                     "JSON lines of {scope, value, reason}")
    run.add_argument("--explain", action="store_true",
                     help="add `explain`: every step, what it did or why it did not run, and "
                     "the page after it")
    experiments = sub.add_parser("experiments", help="experiment tools")
    exp_sub = experiments.add_subparsers(dest="experiments_command", required=True)
    srm = exp_sub.add_parser(
        "srm", help="chi-square sample-ratio check of assignments against configured weights")
    source = srm.add_mutually_exclusive_group(required=True)
    source.add_argument("--url", action="append",
                        help="a running service's /metrics URL (repeat to sum replicas)")
    source.add_argument("--file", type=Path, action="append",
                        help="a saved Prometheus text exposition (repeat to sum)")
    srm.add_argument("--config", type=Path, help="rules file with the weights "
                     "(default REARRANGE_CONFIG)")
    srm.add_argument("--json", action="store_true", help="print JSON instead of a table")
    dupes = sub.add_parser(
        "dupes", help="audit a site for near-duplicate (templated) pages",
        description="Find near-duplicate pages by 10-word shingles (seed 000): the pair "
        "table (jaccard, in, out), the distribution of containment, clusters at the "
        "threshold, and pairs near it to check by eye.")
    add_dupes_arguments(dupes)
    cli_banlist.add_parser(sub)
    audit_cli.add_parser(sub)
    cli_config.add_parser(sub)
    replay_cli.add_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "experiments":
        return _srm(args)
    return {"serve": _serve, "check-config": _check, "run": _run, "dupes": _dupes,
            "banlist": cli_banlist.run, "audit": audit_cli.run,
            "config": cli_config.run, "replay": replay_cli.run}[args.command](args)


def _dupes(args: argparse.Namespace) -> int:
    from app.cli.dupes import run

    return run(args)


def _srm(args: argparse.Namespace) -> int:
    """Exit 0 when no split is flagged, 3 when one is, 1 on a bad config or a source it
    cannot read (a service unreachable too: 3 is taken by the verdict)."""
    from app.cli.client import Refused, Unreachable, read_text
    from app.config.load import load_file
    from app.config.settings import Settings
    from app.experiments.srm import SRM_ALPHA, counts_from_exposition, srm

    path = args.config or Settings().config
    try:
        engine = load_file(path)
    except ConfigError as exc:
        print(f"{path}: invalid: {exc}", file=sys.stderr)
        return 1
    counts: dict[tuple[str, str], float] = {}
    for source in args.url or args.file:
        try:
            text = read_text(source) if args.url else source.read_text()
        except (OSError, Refused, Unreachable) as exc:
            print(f"{source}: cannot read: {exc}", file=sys.stderr)
            return 1
        for key, n in counts_from_exposition(text).items():
            counts[key] = counts.get(key, 0.0) + n
    results = srm(counts, engine.designs())
    if args.json:
        print(orjson.dumps({"alpha": SRM_ALPHA, "experiments": [r.as_dict() for r in results]},
                           option=orjson.OPT_INDENT_2).decode())
    for r in results if not args.json else ():
        split = ", ".join(f"{v} {int(n)} (expected {r.expected.get(v, 0):.0f})"
                          for v, n in r.observed.items())
        verdict = ("no data" if r.p_value is None
                   else f"p = {r.p_value:.3g}" + ("  SRM: do not trust this experiment's "
                                                  "results" if r.flagged else "  ok"))
        print(f"{r.experiment}: {split}; {verdict}")
    return 3 if any(r.flagged for r in results) else 0


def _serve(args: argparse.Namespace) -> int:
    from app.api.serving import serve

    try:
        serve(load_settings(), args.host, args.port, args.workers)
    except RearrangeError as exc:  # StartupRefused, SettingsError, ConfigError, a store's
        # One line, no traceback: the operator's to fix (docs/cli.md, exit codes).
        print(f"rearrange: not starting: {exc}", file=sys.stderr)
        return 2
    return 0


def load_settings() -> Any:
    """Settings from the environment; SettingsError naming each variable refused."""
    from pydantic import ValidationError

    from app.config.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(f"{_variable(e['loc'])}: {e['msg']} (got {e.get('input')!r})"
                             for e in exc.errors())
        raise SettingsError(problems) from None


def _variable(loc: tuple[Any, ...]) -> str:
    """The environment variable of a Settings field (REDIS_URL has no prefix)."""
    name = str(loc[0]) if loc else "?"
    return name if name.isupper() else f"REARRANGE_{name.upper()}"


def _check(args: argparse.Namespace) -> int:
    from app.config.load import check_rebucketing, load_file

    try:
        engine = load_file(args.file)
        if args.against is not None:
            check_rebucketing(load_file(args.against), engine)
    except ConfigError as exc:
        print(f"{args.file}: invalid: {exc}", file=sys.stderr)
        return 1
    for name, pipeline in engine.profiles.items():
        rules = ", ".join(f"{phase.value}:{step.rule.name}{_marks(step)}"
                          for phase, step in pipeline.rules())
        print(f"profile {name}: {rules}")
    for exp in engine.experiments:
        layer = f", layer {exp.layer} slots {list(exp.slots)}" if exp.layer else ""
        salt = f", salt {exp.salt}" if exp.salt else ""
        print(f"experiment {exp.name}: unit {exp.unit}{layer}{salt}, "
              f"variants {exp.ranges()}, rules {list(exp.rules)}")
    if engine.holdout is not None:
        print(f"holdout: unit {engine.holdout.unit}, buckets [0, {engine.holdout.upper})")
    print(f"{args.file}: ok, config_version {engine.version}")
    return 0


def _marks(step: Any) -> str:
    """What check-config adds to a step that is not a plain built-in, always-on one."""
    from app.config.plugins import PythonRule

    policy, marks = step.policy, []
    if isinstance(step.rule, PythonRule):
        marks.append("python")
    if not policy.enabled:
        marks.append("disabled")
    if policy.valid_from is not None or policy.valid_until is not None:
        marks.append("windowed")
    return f" ({', '.join(marks)})" if marks else ""


def _run(args: argparse.Namespace) -> int:
    from app.api.app import build_service
    from app.config.settings import Settings

    overrides: dict[str, object] = {"banlist_path": None, "audit_log": None,
                                    "banlist_seed": args.banlist, "redis_url": None}
    if args.config is not None:
        overrides["config"] = args.config
    settings = Settings().model_copy(update=overrides)
    body = sys.stdin.buffer.read() if str(args.request) == "-" else args.request.read_bytes()
    try:
        service = build_service(settings)
    except ConfigError as exc:
        print(f"config: {exc}", file=sys.stderr)
        return 1
    except FieldError as exc:  # the --banlist file: `banlist: FILE:LINE: field: problem`
        print(f"banlist: {exc}", file=sys.stderr)
        return 1
    status, answered = service.rerank(body, explain=args.explain)
    if status == 503:  # a closed rule failed: no page
        refused = orjson.loads(answered)
        print(f"rule_failed: {refused['rule']} in {refused['phase']}: {refused['problem']}",
              file=sys.stderr)
        return 3
    if status != 200:
        refused = orjson.loads(answered)
        print(f"request: {refused['field']}: {refused['problem']}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(msgspec.json.format(answered, indent=2) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
