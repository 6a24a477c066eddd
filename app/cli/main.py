"""`rearrange serve | check-config FILE | run REQUEST.json | replay CAPTURED.jsonl |
experiments srm|results NAME | dupes PAGES | banlist … | sanctions … | audit search |
config show|versions|rollback`. Exit 0 ok, 1 a finding or a refusal, 2 usage, 3 the
service unreachable (docs/cli.md)."""
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
from app.cli import sanctions as cli_sanctions
from app.cli.dupes import add_dupes_arguments
from app.cli.exits import FINDING, INTERRUPTED, OK, REFUSED, USAGE, calling, invalid
from app.cli.flags import (
    add_global_arguments,
    add_json_flag,
    add_service_arguments,
    json_given_before,
    print_json,
    service_given,
    url,
)
from app.errors import (
    ConfigError,
    FieldError,
    RearrangeError,
    SettingsError,
    validation_problem,
)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rearrange` console script."""
    parser = argparse.ArgumentParser(prog="rearrange", description=__doc__)
    parser.add_argument("--version", action="version", version=f"rearrange {__version__}")
    add_global_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP service (settings from the environment)")
    serve.add_argument("--host", help="listen address (default REARRANGE_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="control port: every route (default "
                       "REARRANGE_PORT or 8080)")
    serve.add_argument("--data-port", type=int, help="data port: POST /v1/rerank and GET "
                       "/healthz on the engine's own listener (default REARRANGE_DATA_PORT "
                       "or 8081)")
    serve.add_argument("--workers", type=int, default=1, help="threads serving the data "
                       "port, in this one process (one banlist index whatever their number)")
    check = sub.add_parser("check-config", help="validate a rules file the way the service does")
    check.add_argument("file", type=Path)
    check.add_argument("--against", type=Path, metavar="OLD",
                       help="also refuse what a reload from OLD would refuse: changes that "
                       "re-bucket units of OLD's running experiments; FILE is then a "
                       "candidate and imports nothing: its plugins must be OLD's")
    add_json_flag(check, "{file, valid, config_version, profiles, experiments, holdout}, or "
                  "{file, valid: false, problem}")
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
    add_json_flag(run, "the response on one line, as the service sends it (default: "
                  "indented)")
    experiments = sub.add_parser("experiments", help="experiment tools")
    exp_sub = experiments.add_subparsers(dest="experiments_command", required=True)
    srm = exp_sub.add_parser(
        "srm", help="chi-square sample-ratio check of assignments against configured weights")
    source = srm.add_mutually_exclusive_group(required=True)
    source.add_argument("--url", action="append", type=url,
                        help="a running service's /metrics URL (repeat to sum replicas)")
    source.add_argument("--file", type=Path, action="append",
                        help="a saved Prometheus text exposition (repeat to sum)")
    srm.add_argument("--config", type=Path, help="rules file with the weights "
                     "(default REARRANGE_CONFIG)")
    add_json_flag(srm, "{config_version, alpha, flagged, experiments}, as GET "
                  "/v1/experiments/srm")
    results = exp_sub.add_parser(
        "results", help="an experiment's results from a running service: an interleaved "
        "one's wins and always-valid decision, an A/B one's exposures")
    results.add_argument("name", help="the experiment's name")
    # --json (the service's answer, as GET /v1/experiments/NAME/results) comes with these
    add_service_arguments(results, "none needed")
    results.set_defaults(calls_service=True, json=False)
    dupes = sub.add_parser(
        "dupes", help="audit a site for near-duplicate (templated) pages",
        description="Find near-duplicate pages by 10-word shingles (seed 000): the pair "
        "table (jaccard, in, out), the distribution of containment, clusters at the "
        "threshold, and pairs near it to check by eye.")
    add_dupes_arguments(dupes)
    cli_banlist.add_parser(sub)
    cli_sanctions.add_parser(sub)
    audit_cli.add_parser(sub)
    cli_config.add_parser(sub)
    replay_cli.add_parser(sub)
    args = parser.parse_args(argv)
    problem = json_given_before(args) or service_given(args)
    if problem:
        parser.error(problem)
    command = {"serve": _serve, "check-config": _check, "run": _run, "dupes": _dupes,
               "experiments": _experiments, "banlist": cli_banlist.run,
               "sanctions": cli_sanctions.run, "audit": audit_cli.run, "config": cli_config.run,
               "replay": replay_cli.run}[args.command]
    try:
        return command(args)
    except OSError as exc:  # a file named on the command line: one line, no traceback
        print(f"rearrange {args.command}: {_os_problem(exc)}", file=sys.stderr)
        return REFUSED
    except KeyboardInterrupt:
        print(f"rearrange {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED


def _os_problem(exc: OSError) -> str:
    """`req.json: No such file or directory` (the file, then why)."""
    if exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


def _dupes(args: argparse.Namespace) -> int:
    from app.cli.dupes import run

    return run(args)


def _experiments(args: argparse.Namespace) -> int:
    if args.experiments_command == "results":
        from app.cli.experiments import results

        return results(args)
    return _srm(args)


def _srm(args: argparse.Namespace) -> int:
    """Exit 0 when no split is flagged, 1 when one is (a finding), for a bad config, a file
    it cannot read or a refusal, 3 when a service cannot be reached."""
    from app.config.load import load_file
    from app.config.settings import Settings

    path = args.config or Settings().config
    try:
        engine = load_file(path)
    except ConfigError as exc:
        print(invalid(path, exc), file=sys.stderr)
        return REFUSED
    try:
        return calling(lambda: _srm_verdict(args, engine), sys.stderr)
    except OSError as exc:
        print(f"{exc.filename}: cannot read: {exc.strerror}", file=sys.stderr)
        return REFUSED


def _srm_verdict(args: argparse.Namespace, engine: Any) -> int:
    from app.cli.client import read_text
    from app.experiments.srm import counts_from_exposition, document, srm

    counts: dict[tuple[str, str], float] = {}
    for source in args.url or args.file:
        text = read_text(source) if args.url else source.read_text()
        for key, n in counts_from_exposition(text).items():
            counts[key] = counts.get(key, 0.0) + n
    results = srm(counts, engine.designs())
    if args.json:
        print_json(document(results, engine.version), sys.stdout)
    for r in results if not args.json else ():
        split = ", ".join(f"{v} {int(n)} (expected {r.expected.get(v, 0):.0f})"
                          for v, n in r.observed.items())
        verdict = ("no data" if r.p_value is None
                   else f"p = {r.p_value:.3g}" + ("  SRM: do not trust this experiment's "
                                                  "results" if r.flagged else "  ok"))
        print(f"{r.experiment}: {split}; {verdict}")
    return FINDING if any(r.flagged for r in results) else OK


def _serve(args: argparse.Namespace) -> int:
    from app.api.serving import serve

    if args.workers < 1:
        print("rearrange: not starting: --workers: at least 1", file=sys.stderr)
        return USAGE
    try:
        serve(load_settings(), args.host, args.port, args.workers, args.data_port)
    except (RearrangeError, OSError) as exc:  # StartupRefused, SettingsError, ConfigError,
        # a store's; a port that cannot be bound. One line, no traceback: the operator's to
        # fix (docs/cli.md, exit codes).
        print(f"rearrange: not starting: {exc}", file=sys.stderr)
        return USAGE
    return OK


def load_settings() -> Any:
    """Settings from the environment; SettingsError naming each variable refused."""
    from pydantic import ValidationError

    from app.config.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(f"{_variable(e['loc'])}: {validation_problem(e)}"
                             for e in exc.errors())
        raise SettingsError(problems) from None


def _variable(loc: tuple[Any, ...]) -> str:
    """The environment variable of a Settings field (REDIS_URL has no prefix)."""
    name = str(loc[0]) if loc else "?"
    return name if name.isupper() else f"REARRANGE_{name.upper()}"


def _check(args: argparse.Namespace) -> int:
    """0 valid, 1 invalid (a finding: with --json, `valid: false` and the problem)."""
    from app.config.load import check_rebucketing, describe, load_file

    try:
        if args.against is None:
            engine = load_file(args.file)
        else:  # the candidate imports nothing the config it is checked against did not load
            old = load_file(args.against)
            engine = load_file(args.file, served=old.plugins)
            check_rebucketing(old, engine)
    except ConfigError as exc:
        print(invalid(args.file, exc), file=sys.stderr)
        if args.json:
            print_json({"file": str(args.file), "valid": False, "problem": str(exc)},
                       sys.stdout)
        return FINDING
    if args.json:
        profiles = {name: [{"phase": phase.value, "rule": step.rule.name, **_flags(step)}
                           for phase, step in pipeline.rules()]
                    for name, pipeline in engine.profiles.items()}
        print_json({"file": str(args.file), "valid": True, **describe(engine),
                    "profiles": profiles}, sys.stdout)
        return OK
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
    return OK


def _flags(step: Any) -> dict[str, bool]:
    """What sets a step apart from a plain built-in, always-on one."""
    from app.config.plugins import PythonRule

    policy = step.policy
    return {"python": isinstance(step.rule, PythonRule), "enabled": policy.enabled,
            "windowed": policy.valid_from is not None or policy.valid_until is not None}


def _marks(step: Any) -> str:
    """What check-config adds to a step that is not a plain built-in, always-on one."""
    flags = _flags(step)
    marks = [m for m, on in (("python", flags["python"]), ("disabled", not flags["enabled"]),
                             ("windowed", flags["windowed"])) if on]
    return f" ({', '.join(marks)})" if marks else ""


def _run(args: argparse.Namespace) -> int:
    """0 answered, 1 refused: a bad config, banlist or request, a closed rule that failed."""
    from app.api.services import build_services
    from app.config.settings import Settings

    overrides: dict[str, object] = {"banlist_path": None, "audit_log": None,
                                    "banlist_seed": args.banlist, "redis_url": None}
    if args.config is not None:
        overrides["config"] = args.config
    settings = Settings().model_copy(update=overrides)
    body = sys.stdin.buffer.read() if str(args.request) == "-" else args.request.read_bytes()
    try:
        service = build_services(settings).rearranger
    except ConfigError as exc:
        print(f"config: {exc}", file=sys.stderr)
        return REFUSED
    except FieldError as exc:  # the --banlist file: `banlist: FILE:LINE: field: problem`
        print(f"banlist: {exc}", file=sys.stderr)
        return REFUSED
    status, answered = service.rerank(body, explain=args.explain)
    if status == 503:  # a closed rule failed: no page
        refused = orjson.loads(answered)
        print(f"rule_failed: {refused['rule']} in {refused['phase']}: {refused['problem']}",
              file=sys.stderr)
        return REFUSED
    if status != 200:
        refused = orjson.loads(answered)
        print(f"request: {refused['field']}: {refused['problem']}", file=sys.stderr)
        return REFUSED
    shown = answered if args.json else msgspec.json.format(answered, indent=2)
    sys.stdout.write(shown.decode() + "\n")
    return OK


if __name__ == "__main__":
    sys.exit(main())
