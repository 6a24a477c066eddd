"""`rearrange serve | check-config FILE | run REQUEST.json | banlist …`."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import orjson

from app import cli_banlist
from app.errors import ConfigError, FieldError


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rearrange` console script."""
    parser = argparse.ArgumentParser(prog="rearrange", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP service (settings from the environment)")
    serve.add_argument("--host", help="listen address (default REARRANGE_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default REARRANGE_PORT or 8080)")
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    check = sub.add_parser("check-config", help="validate a rules file the way the service does")
    check.add_argument("file", type=Path)
    run = sub.add_parser("run", help="run the pipeline offline on a request body, print the "
                         "response")
    run.add_argument("request", type=Path, help="a JSON request body ('-' for stdin)")
    run.add_argument("--config", type=Path, help="rules file (default REARRANGE_CONFIG)")
    run.add_argument("--banlist", type=Path,
                     help="banlist entries (JSON lines of {scope, value, reason}) to apply")
    cli_banlist.add_parser(sub)
    args = parser.parse_args(argv)
    commands = {"serve": _serve, "check-config": _check, "run": _run,
                "banlist": cli_banlist.run}
    return commands[args.command](args)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.settings import Settings

    settings = Settings()
    uvicorn.run("app.main:create_app", factory=True, host=args.host or settings.host,
                port=args.port or settings.port, workers=args.workers, loop="uvloop",
                http="httptools", proxy_headers=False, timeout_graceful_shutdown=10,
                log_level=os.environ.get("REARRANGE_LOG_LEVEL", "info"))
    return 0


def _check(args: argparse.Namespace) -> int:
    from app.config import load_file

    try:
        engine = load_file(args.file)
    except ConfigError as exc:
        print(f"{args.file}: invalid: {exc}", file=sys.stderr)
        return 1
    for name, pipeline in engine.profiles.items():
        rules = ", ".join(f"{phase.value}:{step.rule.name}" for phase, step in pipeline.rules())
        print(f"profile {name}: {rules}")
    for exp in engine.experiments:
        print(f"experiment {exp.name}: unit {exp.unit}, variants {dict(exp.variants)}, "
              f"rules {list(exp.rules)}")
    print(f"{args.file}: ok, config_version {engine.version}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from app.main import build_service
    from app.settings import Settings

    overrides: dict[str, object] = {"banlist_path": None, "audit_log": None,
                                    "banlist_seed": args.banlist, "redis_url": None}
    if args.config is not None:
        overrides["config"] = args.config
    settings = Settings().model_copy(update=overrides)
    body = sys.stdin.buffer.read() if str(args.request) == "-" else args.request.read_bytes()
    try:
        service = build_service(settings)
        response = service.rerank(body)
    except ConfigError as exc:
        print(f"config: {exc}", file=sys.stderr)
        return 1
    except FieldError as exc:
        print(f"request: {exc.field}: {exc.problem}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(orjson.dumps(response, option=orjson.OPT_INDENT_2) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
