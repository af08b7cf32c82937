# Two commands a new user types: `make run` and `make test`.  Every target builds files and
# skips what is already built, so a second call costs a few stat() calls.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
REPORT_DIR ?= reports/latest

.PHONY: setup run test lint bench clean toxiproxy postgres rabbitmq kafka examples consumer-corpus \
	kafka-corpus chromium faketime

setup: $(INSTALLED) toxiproxy postgres rabbitmq kafka chromium faketime examples consumer-corpus \
	kafka-corpus

$(INSTALLED): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[dev]'
	@touch $@

toxiproxy:
	@scripts/ensure-toxiproxy

postgres:
	@scripts/ensure-postgres

# Debian's rabbitmq-server, for queue-consumer targets (the harness starts throwaway nodes).
rabbitmq:
	@scripts/ensure-rabbitmq

# Apache Kafka's broker jars from Maven Central, for Kafka consumers (the harness starts throwaway
# single-node KRaft brokers from them); stamped, so fast when done.
kafka:
	@scripts/ensure-kafka

# libfaketime (Debian's packages) and its preload shim, for targets whose clock the harness moves
# from outside ([clock] kind = "faketime").
faketime:
	@scripts/ensure-faketime

# Debian's chromium, for the HTML report's browser tests (Playwright drives it, downloads nothing).
chromium:
	@scripts/ensure-chromium

# The third-party example targets (npm, PyPI, Debian's redis-server); stamped, so fast when done.
examples: $(INSTALLED)
	@examples/targets/install-all --python $(BIN)/python

# The queue consumers of tests/consumer_corpus (PyPI, npm, the Go module proxy); stamped, so fast
# when done.
consumer-corpus: $(INSTALLED)
	@tests/consumer_corpus/install-all --python $(BIN)/python

# The Kafka consumers of tests/kafka_corpus (PyPI, npm, the Go module proxy); stamped, so fast when
# done.
kafka-corpus: $(INSTALLED)
	@tests/kafka_corpus/install-all --python $(BIN)/python

run: setup
	$(BIN)/idem-harness run --reference --postgres --report-dir $(REPORT_DIR)

# The suite waits on networks and processes more than it computes: four workers on two cores
# (each with its own Toxiproxy and PostgreSQL); a module's tests stay on one worker.  Four
# rather than three took the suite from 12 min 15 s to 11 min 10 s here.
TEST_JOBS ?= 4
test: setup
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadscope $(PYTEST_ARGS)

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/mypy

# Speed and memory goals, measured side by side and printed with their ratios.
bench: setup
	@for script in bench/*.py; do echo "== $$script"; $(BIN)/python -P $$script || exit 1; done

clean:
	rm -rf $(VENV) .tools .mypy_cache .pytest_cache .ruff_cache
