.PHONY: demo test lint bench lock mutate

DEPS ?= locked
PYTEST_ARGS ?=

# Install (exactly the locked, hashed requirements, into .venv) and run the main job embedded.
demo:
	python3 -m venv .venv && .venv/bin/pip install -q -r requirements/server.txt && .venv/bin/pip install -q --no-deps -e . && .venv/bin/retrylens demo --tasks 2000 --seed 7

# Fresh venv (DEPS=locked|lowest|newest), local Kafka broker, every test (infra/test.sh).
test:
	DEPS=$(DEPS) PYTEST_ARGS='$(PYTEST_ARGS)' bash infra/test.sh

lint:
	.venv/bin/ruff check .

bench:
	.venv/bin/python bench/ingest.py

# Mutation testing of the guarantee modules (cosmic-ray; `uv sync --extra mutation` first).
# TARGETS='backoff otlp' runs some; `.venv/bin/python infra/mutate.py --list` shows them all.
mutate:
	.venv/bin/python infra/mutate.py $(TARGETS)

# Refresh uv.lock to the newest versions the registry serves (commit the result).
lock:
	uv lock --upgrade
