# Two entry points for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test bench bench-experiments bench-banlist load lint clean

$(BIN)/rearrange: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

run: $(BIN)/rearrange
	REARRANGE_BANLIST_SEED=$${REARRANGE_BANLIST_SEED-config/banlist.sample.jsonl} $(BIN)/rearrange serve

test: $(BIN)/rearrange
	$(BIN)/pytest

bench: $(BIN)/rearrange
	$(BIN)/python -m bench.pipeline
	$(BIN)/python -m bench.near_duplicates

bench-experiments: $(BIN)/rearrange
	$(BIN)/python -m bench.experiments

bench-banlist: $(BIN)/rearrange
	$(BIN)/python -m bench.banlist

# The staging load test against local replicas: 60 s, or SOAK=1 for 10 minutes with the
# flat-memory check (bench/load.py; REDIS_URL in the environment puts the replicas on Redis).
load: $(BIN)/rearrange
	$(BIN)/python -m bench.load $(LOAD_ARGS)

lint: $(BIN)/rearrange
	$(BIN)/ruff check app tests bench

clean:
	rm -rf $(VENV) var .pytest_cache
