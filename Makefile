# Two commands a new user types: `make run` and `make test`.  Every target builds files and
# skips what is already built, so a second call costs a few stat() calls.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
TOXIPROXY := .tools/toxiproxy-server
REPORT_DIR ?= reports/latest

.PHONY: setup run test lint bench clean toxiproxy postgres

setup: $(INSTALLED) toxiproxy postgres

$(INSTALLED): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[dev]'
	@touch $@

toxiproxy:
	@scripts/ensure-toxiproxy

postgres:
	@scripts/ensure-postgres

$(TOXIPROXY):
	@scripts/ensure-toxiproxy

run: setup
	$(BIN)/idem-harness run --reference --report-dir $(REPORT_DIR)

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: setup
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .tools .mypy_cache .pytest_cache .ruff_cache
