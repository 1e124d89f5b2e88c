# Quick start: `make demo` runs the default what-if scenario; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORE_STAMP := $(VENV)/.core-installed

.PHONY: demo test test-fast install clean goldens bench notebooks

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The demo needs only the core (simpy, networkx, numpy, matplotlib, ...); the tests need the dev extras (torch, pytest).
$(CORE_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e .
	touch $(CORE_STAMP)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP) $(CORE_STAMP)

install: $(STAMP)

demo: $(CORE_STAMP)
	$(BIN)/simdist run scenarios/default.yaml --plot out/demo.png

test: $(STAMP)  # the emulated-cluster tests time real runs: they go last, alone, so no other test takes their CPUs
	$(BIN)/python -m pytest -n 2 -q -m "not emulab"
	$(BIN)/python -m pytest -q -m emulab

test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q -m "not slow"

goldens: $(STAMP)
	$(BIN)/python -m tests.golden.regenerate --regenerate

notebooks: $(STAMP)
	$(BIN)/python -m tests.notebooks.run --out out/notebooks

bench: $(STAMP)
	$(BIN)/python benchmarks/collectives.py

clean:
	rm -rf $(VENV) out .pytest_cache
