"""Per-attempt overhead of a governed call vs a bare tenacity-wrapped call, same run.

Both wrap the same trivial function (so the figure is the wrapper's cost, not the work's)
on two paths: success on the first attempt, and one failure then success (a retry with
a zero wait). The governed call emits its events through the real Emitter into the
in-memory transport (``retrylens.testing.MemorySink``); the pump's serialization runs on
its background thread, as in production. Usage: ``python bench/sdk_overhead.py [--json]``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime

import tenacity

from retrylens.ingest.emitter import Emitter
from retrylens.sdk import Governor, RetryPolicy
from retrylens.sdk.policy import BackoffPolicy
from retrylens.testing import MemorySink


def _per_attempt_us(run_once: Callable[[], object], attempts_per_call: int, calls: int) -> float:
    for _ in range(min(200, calls)):
        run_once()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            run_once()
        best = min(best, (time.perf_counter() - start) / (calls * attempts_per_call) * 1e6)
    return best


def measure(calls: int = 2_000, validate_events: bool = False) -> dict[str, float]:
    sink = MemorySink()
    emitter = Emitter(sink=sink, spool=None, queue_size=1_000_000)
    governor = Governor(
        RetryPolicy(backoff=BackoffPolicy(base_ms=0, cap_ms=0)), project="bench", emit=emitter.emit,
        sleep=lambda s: None, rng=random.Random(1), validate_events=validate_events,
        wall=lambda: datetime(2024, 1, 1, tzinfo=UTC),
    )
    retrying = tenacity.Retrying(stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_none(), reraise=True)

    def ok() -> int:
        return 1

    state = {"n": 0}

    def flaky() -> int:
        state["n"] += 1
        if state["n"] % 2:
            raise TimeoutError("transient")
        return 1

    results = {
        "governed_us": _per_attempt_us(lambda: governor.call(ok, goal="bench task", agent="bench"), 1, calls),
        "tenacity_us": _per_attempt_us(lambda: retrying(ok), 1, calls),
        "governed_retry_us": _per_attempt_us(lambda: governor.call(flaky, goal="bench task", agent="bench"), 2, calls),
        "tenacity_retry_us": _per_attempt_us(lambda: retrying(flaky), 2, calls),
    }
    emitter.close()
    results["ratio"] = results["governed_us"] / results["tenacity_us"]
    results["retry_ratio"] = results["governed_retry_us"] / results["tenacity_retry_us"]
    results["events_delivered"] = len(sink.records)
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calls", type=int, default=2_000)
    args = parser.parse_args()
    results = measure(args.calls)
    if args.json:
        print(json.dumps(results))
        return
    for key, value in results.items():
        print(f"{key:>20}: {value}")


if __name__ == "__main__":
    main()
