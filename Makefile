.PHONY: demo test lint bench

# Install and run the main job on embedded defaults (simulated fleet → events → store → metrics).
demo:
	python3 -m pip install -e . && retrylens demo --tasks 2000 --seed 7

# Install, start a local Kafka broker, run every test (see infra/test.sh).
test:
	bash infra/test.sh

lint:
	ruff check .

bench:
	python3 bench/ingest.py
