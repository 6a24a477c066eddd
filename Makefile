# Two entry points for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test need-redis miri pgo bench bench-experiments bench-banlist load lint clean

ENGINE_SOURCES := Cargo.toml Cargo.lock $(shell find crates -name '*.rs' -o -name Cargo.toml)

# pyproject.toml's requirements, one a line for pip: the build backend's (`build`: maturin)
# or an extra's (the project's own `rearrange[...]` in it expanded), so that pip installs
# the dependencies alone and only maturin compiles the engine.
define REQUIREMENTS
import sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))
extras = project["project"]["optional-dependencies"]
def expand(extra):
    for requirement in extras[extra]:
        name, _, inner = requirement.partition("[")
        if name.strip() == project["project"]["name"]:
            for other in inner.partition("]")[0].split(","):
                yield from expand(other.strip())
        else:
            yield requirement
want = sys.argv[1]
print("\n".join(project["build-system"]["requires"] if want == "build" else expand(want)))
endef
export REQUIREMENTS
install = $(BIN)/python -c "$$REQUIREMENTS" $(1) > $(VENV)/requirements-$(1).txt \
	&& $(BIN)/pip install --quiet -r $(VENV)/requirements-$(1).txt

# The venv, with maturin (the build backend) in it.
MATURIN := $(BIN)/maturin
$(MATURIN):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(call install,build)

# The app installed editable with its runtime dependencies, and the engine compiled into
# app/_engine*.so: one `maturin develop`, the engine's only compile on the way to `make run`
# and `make test` (cargo's progress shows; the first build takes minutes).
$(BIN)/rearrange: $(MATURIN) pyproject.toml
	@echo "make: building the Rust engine (the first time takes about 3 minutes)..."
	VIRTUAL_ENV=$(abspath $(VENV)) $(MATURIN) develop --release
	touch $@ $(ENGINE)

# The dev extra's tools on top (`make test`, `make lint`, `make bench`): pip installs them
# from the list alone, without building the project again.
DEV := $(VENV)/.dev-installed
$(DEV): $(BIN)/rearrange
	@echo "make: installing the test, lint and benchmark tools (pyproject's dev extra)..."
	$(call install,dev)
	touch $@

# An edit to the Rust crate rebuilds the extension in place.
ENGINE := $(VENV)/.engine-built
$(ENGINE): $(BIN)/rearrange $(ENGINE_SOURCES)
	@echo "make: rebuilding the Rust engine (crates/ changed)..."
	VIRTUAL_ENV=$(abspath $(VENV)) $(MATURIN) develop --release --skip-install
	touch $@

run: $(ENGINE)
	REARRANGE_BANLIST_SEED=$${REARRANGE_BANLIST_SEED-config/banlist.sample.jsonl} $(BIN)/rearrange serve

# The Redis tests start their own redis-server: without one, say so before installing anything.
need-redis:
	@command -v redis-server >/dev/null || { echo "make test: redis-server is not installed; the \
	Redis tests start their own. Install it: apt-get install redis-server (Debian, Ubuntu) or \
	brew install redis (macOS)" >&2; exit 2; }

# The Python suite on four processes (pytest-xdist; each test starts its own redis-server
# and service on free ports and works in its own tmp_path), and beside it the crate's own
# tests at the lowest CPU priority. Most of the suite waits on the servers it started: on
# two cores, four pytest processes kept 0.8 of a core busy, so cargo's build and run take
# the idle CPU instead of a turn of their own (`nice -n 19`: the suite's processes win the
# CPU whenever they want it, so their timing is as without cargo). cargo's output follows
# pytest's. Either failing fails the target: pytest exits 5 if it ran no test, and any
# non-zero exit fails it. need-redis is first. PYTEST_WORKERS=2 for a smaller machine. The
# 15 slowest tests are listed at the end: what to look at first when CI nears its budget.
# `cargo test --lib`: the crate's tests are all unit tests. Its default target selection
# would also build the library a second time (cdylib and rlib, for doctests, of which it
# has none, and for the decode_loop example): two more minutes of CPU on a 2-core host,
# which CI waited for after pytest. make lint's `clippy --all-targets` still compiles the
# example and the benches.
# UNIT_TESTS: at the release profile, so that every dependency is the one the extension's
# build already compiled (the test profile compiled them all again: about 190 s of CPU,
# taken from pytest on two cores, then waited for after it), with the engine crate alone
# at opt-level 1, with debug assertions, overflow checks and line tables (a failing test's
# backtrace names files and lines), as Cargo.toml's test profile has it.
PYTEST_WORKERS ?= 4
UNIT_TESTS := --release --lib $(foreach setting,opt-level=1 debug-assertions=true \
	overflow-checks=true debug="line-tables-only",\
	--config 'profile.release.package.rearrange-engine.$(setting)')
test: need-redis $(DEV) $(ENGINE)
	@log=$$(mktemp); nice -n 19 cargo test $(UNIT_TESTS) --quiet > $$log 2>&1 & cargo=$$!; \
	$(BIN)/pytest -n $(PYTEST_WORKERS) --durations=15; pytest=$$?; \
	wait $$cargo; rust=$$?; echo "--- cargo test (exit $$rust)"; cat $$log; rm -f $$log; \
	[ $$pytest -eq 0 ] && [ $$rust -eq 0 ] || { echo "make test: pytest exited $$pytest, \
	cargo test $$rust" >&2; exit 1; }

# Miri (the nightly toolchain's interpreter, which stops at undefined behaviour: reads out of
# bounds, misaligned or of uninitialised memory, aliasing violations, data races) on the
# banlist index's unsafe code: for each unsafe block, a unit test that reaches it (the SIMD
# compares, the unchecked slices, the page's stack buffer and prefetches, the filter's
# pointers; docs/banlist-index.md), with fewer cases under cfg(miri). The random-churn and
# model tests reach the same code the long way and stay with cargo test: Miri runs code
# about a thousand times slower, and an index of its 8 K tables takes it seconds. Bounded
# (the dependencies' build apart; Miri compiles the crate itself as it starts): a test
# that grows past the bound fails this target, not CI's time. Needs `rustup toolchain install nightly --component miri,rust-src` (.ci/run
# installs it).
MIRI_TESTS := banlist::names::tests::the_portable banlist::chunks::tests::a_chunk_ \
	banlist::shard::tests::a_packed_row \
	banlist::page::tests::a_walk_that_goes_on_past_what_it_found \
	banlist::filter::tests::a_snapshot_keeps
# CI runs it at nice 19 beside pytest, which can slow it several-fold: the bound leaves
# room for that (alone, the tests take about 25 s).
MIRI_SECONDS := 600
miri:
	cargo +nightly miri test --lib --no-run --quiet  # the dependencies, unbounded
	@timeout $(MIRI_SECONDS) cargo +nightly miri test --lib -- $(MIRI_TESTS); rc=$$?; \
	if [ $$rc -eq 124 ]; then echo "make miri: the tests ran past $(MIRI_SECONDS) s" >&2; fi; \
	exit $$rc

bench: $(DEV) $(ENGINE)
	$(BIN)/python -m bench.pipeline
	$(BIN)/python -m bench.near_duplicates

bench-experiments: $(DEV) $(ENGINE)
	$(BIN)/python -m bench.experiments

# The engine as the image ships it: built with profile-guided optimization, in place of
# app/_engine*.so (bench/pgo.py: instrumented, trained on the benchmarks' pages, rebuilt;
# needs `rustup component add llvm-tools`). A later edit to the crate rebuilds it plain.
pgo: $(DEV)
	$(BIN)/python -m bench.pgo
	touch $(ENGINE)

# The banlist from Python (check, memory, Redis propagation and resync), then the Rust index
# alone against bare hash probes at 10 M entries (crates/engine/benches/banlist.rs).
bench-banlist: $(DEV) $(ENGINE)
	$(BIN)/python -m bench.banlist
	cargo bench --bench banlist -- --entries 10000000

# The staging load test against local replicas: 60 s, or SOAK=1 for 10 minutes with the
# flat-memory check (bench/load.py; REDIS_URL in the environment puts the replicas on Redis).
load: $(DEV) $(ENGINE)
	$(BIN)/python -m bench.load $(LOAD_ARGS)

# ruff; the layers of app/ (import-linter's contracts in pyproject.toml); mypy, strict on
# app/ (pyproject's [tool.mypy]); stubtest holds app/_engine.pyi to the built engine;
# rustfmt, clippy and rustdoc on the crate (a broken intra-doc link or a stray `<tag>` in a
# doc comment fails, private items included: the crate's docs are for its developers).
lint: $(DEV) $(ENGINE)
	$(BIN)/ruff check app tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m mypy.stubtest app._engine
	cargo fmt --all --check
	cargo clippy --all-targets --quiet -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --document-private-items --quiet

clean:
	rm -rf $(VENV) var .pytest_cache target app/_engine*.so
