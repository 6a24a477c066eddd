"""The engine built with profile-guided optimization (PGO): what the service image ships.

Usage: python -m bench.pgo [--wheel-dir DIR] [--keep DIR]

Three steps, each printed as it runs:

1. The engine is compiled with LLVM's instrumentation (`-Cprofile-generate`) into a wheel of
   its own (`target/pgo-generate`, so the normal build's cache is left alone).
2. The training run (`train`) loads that instrumented engine and serves the benchmarks'
   pages through the service as `rearrange serve` builds it: both profiles of the sample
   config, 10 to 500 documents, with and without texts, against a banlist of 20,000
   generated entries that some of the pages' URLs match, each page both through the
   engine's call (the control port's path) and as an HTTP request to the data port's
   listener (hyper and the listener's own code). Each call writes what ran how often;
   `llvm-profdata` (rustup's `llvm-tools` component) merges the counts.
3. The engine is compiled again with the counts (`-Cprofile-use`): LLVM lays out the hot
   paths of decoding, the rules and the response writer together and inlines by what ran.
   Without `--wheel-dir` the result replaces `app/_engine*.so` in place (as `maturin
   develop` does); with it, a wheel of the whole package is written there (the Dockerfile's
   build stage installs it).

The engine's call costs 8 to 17 % less than with the plain `--release` build
(docs/speed.md, "The build the image ships"). The result behaves the same:
PGO changes which code is laid out where, never what it computes, and the suite runs on
either build. A change to the engine after the training only costs the changed functions
their profile (LLVM ignores counts that no longer match); rerun this after engine changes
before measuring.
"""
from __future__ import annotations

import argparse
import http.client
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAINING_BANS = 20_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pgo", description=__doc__.split("\n")[0])
    parser.add_argument("--wheel-dir", type=Path, metavar="DIR",
                        help="write the optimized wheel here instead of replacing app/_engine")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep the training's merged profile (merged.profdata) here")
    parser.add_argument("--train", type=Path, metavar="ENGINE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.train is not None:  # step 2, in a process of its own (below)
        train(args.train)
        return 0
    profdata = llvm_profdata()
    with tempfile.TemporaryDirectory(prefix="rearrange-pgo-") as tmp_name:
        tmp = Path(tmp_name)
        raw = tmp / "profiles"
        step(1, "the instrumented engine")
        instrumented = engine_of(build(tmp / "generate", f"-Cprofile-generate={raw}",
                                       "pgo-generate"), tmp / "instrumented")
        step(2, "the training run")
        subprocess.run([sys.executable, "-m", "bench.pgo", "--train", str(instrumented)],
                       cwd=ROOT, check=True,
                       env={**os.environ, "LLVM_PROFILE_FILE": str(raw / "%p-%m.profraw")})
        merged = tmp / "merged.profdata"
        subprocess.run([str(profdata), "merge", "-o", str(merged), str(raw)], check=True)
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy2(merged, args.keep / "merged.profdata")
        step(3, "the optimized engine")
        wheel = build(args.wheel_dir or tmp / "use", f"-Cprofile-use={merged}", "pgo-use")
        if args.wheel_dir is None:
            target = install_engine(wheel)
            print(f"bench.pgo: {target.relative_to(ROOT)} is the PGO build")
        else:
            print(f"bench.pgo: {wheel}")
    return 0


def step(number: int, what: str) -> None:
    print(f"bench.pgo: {number}/3 {what} ({time.strftime('%H:%M:%S')})", flush=True)


def llvm_profdata() -> Path:
    """rustup's llvm-profdata: the one of rustc's own LLVM (another version's format may not
    be readable by it)."""
    sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True,
                             check=True).stdout.strip()
    host = next(line.split(": ", 1)[1] for line in subprocess.run(
        ["rustc", "-vV"], capture_output=True, text=True, check=True).stdout.splitlines()
        if line.startswith("host: "))
    found = Path(sysroot) / "lib" / "rustlib" / host / "bin" / "llvm-profdata"
    if not found.is_file():
        raise SystemExit("bench.pgo: no llvm-profdata in the Rust toolchain; install it with "
                         "`rustup component add llvm-tools`")
    return found


def build(out: Path, flag: str, target: str) -> Path:
    """A release wheel of the package compiled with `flag`, in `out`; its path."""
    out.mkdir(parents=True, exist_ok=True)
    maturin = shutil.which("maturin", path=str(Path(sys.executable).parent)) or "maturin"
    flags = " ".join(filter(None, (os.environ.get("RUSTFLAGS"), flag)))
    subprocess.run([maturin, "build", "--release", "--quiet", "--out", str(out),
                    "--interpreter", sys.executable], cwd=ROOT,
                   check=True, env={**os.environ, "RUSTFLAGS": flags,
                                    "CARGO_TARGET_DIR": str(ROOT / "target" / target)})
    (wheel,) = out.glob("rearrange-*.whl")
    return wheel


def engine_of(wheel: Path, where: Path) -> Path:
    """The engine's shared object, taken out of `wheel` into `where`."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = (n for n in archive.namelist() if n.startswith("app/_engine") and
                   n.endswith((".so", ".pyd")))
        return Path(archive.extract(name, where))


def install_engine(wheel: Path) -> Path:
    """The wheel's engine in place of app/_engine*.so; the path written."""
    with tempfile.TemporaryDirectory() as tmp:
        built = engine_of(wheel, Path(tmp))
        target = ROOT / "app" / built.name
        shutil.copyfile(built, target.with_suffix(".pgo-new"))
        target.with_suffix(".pgo-new").replace(target)  # a running server keeps its mapping
    return target


def train(engine: Path) -> None:
    """Serve the training pages through `engine` (the instrumented build, loaded as
    app._engine before anything imports the real one)."""
    spec = importlib.util.spec_from_file_location("app._engine", engine)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["app._engine"] = module
    spec.loader.exec_module(module)
    statuses = serve_training_pages()
    for status, count in sorted(statuses.items()):
        print(f"bench.pgo: trained on {count} responses of status {status}")
    if set(statuses) != {200}:  # the counts would be of the error path, not the request's
        raise SystemExit("bench.pgo: some training pages were refused; no profile is built")


def serve_training_pages(repeat: int = 4000) -> dict[int, int]:
    """The training workload (see the module's doc): status -> responses. `repeat` is the
    documents each page and text setting serves in all (at least 10 calls each), once
    through the engine's call (the control port's path) and once through the data port's
    listener over loopback (hyper's code and the listener's own are trained too)."""
    import orjson

    from app.api.dataplane import DataPlaneServer
    from app.api.services import build_services
    from app.config.settings import Settings
    from bench.pages import make_serp, write_banlist

    statuses: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="rearrange-pgo-train-") as tmp:
        bans = Path(tmp) / "bans.jsonl"
        write_banlist(bans, TRAINING_BANS, 2024)
        services = build_services(Settings(
            config=ROOT / "config" / "rules.yaml", banlist_path=Path(tmp) / "banlist.jsonl",
            banlist_seed=bans,
            audit_log=None, max_documents=1000, config_poll_seconds=0))
        data_plane = DataPlaneServer(services)
        connection = None
        try:
            port = data_plane.start("127.0.0.1", 0, 1)
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            for profile in ("default", "commercial"):
                for n in (10, 20, 50, 100, 500):
                    for text in (False, True):
                        page = make_serp(n, 2024, f"pgo-{n}", text)
                        body = orjson.dumps({**page, "profile": profile})
                        for _ in range(max(10, repeat // n)):
                            status, _ = services.rearranger.rerank(body)
                            statuses[status] = statuses.get(status, 0) + 1
                            connection.request("POST", "/v1/rerank", body,
                                               {"Content-Type": "application/json"})
                            with connection.getresponse() as answer:
                                answer.read()
                                statuses[answer.status] = statuses.get(answer.status, 0) + 1
        finally:
            if connection is not None:
                connection.close()
            data_plane.stop(1.0)
            services.close()
    return statuses


if __name__ == "__main__":
    sys.exit(main())
