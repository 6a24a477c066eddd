# Two entry points for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test bench bench-experiments bench-banlist load lint clean

ENGINE_SOURCES := Cargo.toml Cargo.lock $(shell find crates -name '*.rs' -o -name Cargo.toml)

# The venv with the app installed editable; maturin (the build backend) compiles the
# Rust engine into app/_engine*.so on the way.
$(BIN)/rearrange: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(ENGINE)

# An edit to the Rust crate rebuilds the extension in place before the tests run.
ENGINE := $(VENV)/.engine-built
$(ENGINE): $(BIN)/rearrange $(ENGINE_SOURCES)
	VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/maturin develop --quiet --release --skip-install
	touch $@

run: $(ENGINE)
	REARRANGE_BANLIST_SEED=$${REARRANGE_BANLIST_SEED-config/banlist.sample.jsonl} $(BIN)/rearrange serve

# The crate's own tests and lints, then the Python suite (which exits 5 if it ran no test:
# that fails the target, as any non-zero exit does).
test: $(ENGINE)
	cargo fmt --all --check
	cargo clippy --all-targets --quiet -- -D warnings
	cargo test --quiet
	$(BIN)/pytest

bench: $(ENGINE)
	$(BIN)/python -m bench.pipeline
	$(BIN)/python -m bench.near_duplicates

bench-experiments: $(ENGINE)
	$(BIN)/python -m bench.experiments

bench-banlist: $(ENGINE)
	$(BIN)/python -m bench.banlist

# The staging load test against local replicas: 60 s, or SOAK=1 for 10 minutes with the
# flat-memory check (bench/load.py; REDIS_URL in the environment puts the replicas on Redis).
load: $(ENGINE)
	$(BIN)/python -m bench.load $(LOAD_ARGS)

lint: $(BIN)/rearrange
	$(BIN)/ruff check app tests bench

clean:
	rm -rf $(VENV) var .pytest_cache target app/_engine*.so
