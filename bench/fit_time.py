"""The risk model's training time on the demo's fit, side by side with the columns before word hashes.

Issue 34's keep: "the model's training time on the demo within today's" (before session 14
added every content word and word pair of the input as ``h:`` columns). Same process, same
data, alternated: ``fit_in_memory`` on the demo's learning share of the default fleet
(first 800 of 1,000 tasks' stored features, as ``retrylens train`` reads them from the store)

- ``current``: the features as stored (word hashes, feature set v6), the shipped fit (warm-started
  selection and calibration fits);
- ``baseline``: before session 14 — the same rows with the word hashes taken out of each event, so
  the model reads the 12 stored keywords (``kw:``), every fit started from zero (cold) as then;
- ``cold``: session 14's code — the word hashes, every fit cold.

The cold arms start each regression from zero (:class:`CompactLogisticRegression`'s ``init``
ignored for the arm's fit; a bench probe, not a product setting).

Figures: median CPU seconds (``time.process_time``; steadier than wall time on a shared
machine) and wall seconds per fit, and each model's held-out AUC / Brier on the last 200 tasks.

    python bench/fit_time.py [--json] [--rounds 5] [--tasks 1000] [--seed 7] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from retrylens.analytics import classifier as clf
from retrylens.analytics.training import Example, stream_examples
from retrylens.config import load_settings
from retrylens.sdk.text.word_hashes import KEYS as WORD_HASH_KEYS
from retrylens.simulation import load_scenario, run_fleet
from retrylens.store import open_store
from retrylens.store.event_table import event_row

ROOT = Path(__file__).resolve().parents[1]
START = datetime(2026, 11, 1, tzinfo=UTC)


def examples(tasks: int, seed: int, folder: Path) -> list[Example]:
    """The default fleet's finished tasks as ``retrylens train`` reads them from the store."""
    settings = load_settings(data_dir=folder / "data", clickhouse_dsn=f"chdb://{folder / 'chdb'}",
                             clickhouse_database=f"fit_{uuid.uuid4().hex[:8]}", kafka_bootstrap_servers="")
    store = open_store(settings)
    events: list[Any] = []
    run_fleet(load_scenario(ROOT / "simulation" / "default_scenario.yaml"), tasks=tasks, seed=seed,
              emit=events.append, start=START)
    store.insert_rows([event_row(e, topic="bench", partition=0, offset=i) for i, e in enumerate(events)])
    return [e for block in stream_examples(store) for e in block]


def without_hashes(example: Example) -> Example:
    """The example as stored before word hashes: its features without the ``wh*`` values."""
    features = {k: v for k, v in example.features.items() if k not in WORD_HASH_KEYS}
    return Example(example.start, features, example.context, example.label)


@contextmanager
def cold_fits(cold: bool) -> Iterator[None]:
    """Every regression fitted from zero while inside (the fit before the warm start), if ``cold``."""
    if not cold:
        yield
        return
    warm_init = clf.CompactLogisticRegression.__init__

    def init(self: Any, C: float = 1.0, max_iter: int = 2000, init: Any = None) -> None:  # noqa: N803
        warm_init(self, C, max_iter, None)

    clf.CompactLogisticRegression.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        clf.CompactLogisticRegression.__init__ = warm_init  # type: ignore[method-assign]


def timed_fit(rows: list[Example], cold: bool) -> tuple[float, float, clf.RiskModel]:
    inputs = [e.as_model_input() for e in rows]
    with cold_fits(cold):
        wall, cpu = time.perf_counter(), time.process_time()
        model = clf.fit_in_memory(inputs, [e.label for e in rows])
        return time.process_time() - cpu, time.perf_counter() - wall, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="200 tasks, one round")
    args = parser.parse_args()
    tasks, rounds = (200, 1) if args.smoke else (args.tasks, args.rounds)
    with tempfile.TemporaryDirectory(prefix="fit-time-", ignore_cleanup_errors=True) as tmp:
        rows = examples(tasks, args.seed, Path(tmp))
    cut = int(len(rows) * 0.8)
    keywords = [without_hashes(e) for e in rows]
    arms = {"current": (rows, False), "baseline": (keywords, True), "cold": (rows, True)}
    times: dict[str, dict[str, list[float]]] = {arm: {"cpu_s": [], "wall_s": []} for arm in arms}
    held: dict[str, dict[str, Any]] = {}
    for _ in range(rounds):
        for arm, (data, cold) in arms.items():
            cpu, wall, model = timed_fit(data[:cut], cold)
            times[arm]["cpu_s"].append(round(cpu, 3))
            times[arm]["wall_s"].append(round(wall, 3))
            test = data[cut:]
            held[arm] = clf.evaluate([e.label for e in test],
                                     model.predict_proba([e.as_model_input() for e in test])).as_dict()
    result: dict[str, Any] = {
        "tasks": len(rows), "train_rows": cut, "rounds": rounds, "load": os.getloadavg(),
        **{arm: {**t, "cpu_median_s": statistics.median(t["cpu_s"]), "wall_median_s": statistics.median(t["wall_s"]),
                 "held_out": {k: held[arm].get(k) for k in ("roc_auc", "brier")}} for arm, t in times.items()},
    }
    result["cpu_ratio"] = round(result["current"]["cpu_median_s"] / result["baseline"]["cpu_median_s"], 3)
    result["cold_cpu_ratio"] = round(result["cold"]["cpu_median_s"] / result["baseline"]["cpu_median_s"], 3)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    for arm in arms:
        a = result[arm]
        print(f"{arm}: CPU {a['cpu_median_s']:.3f} s (rounds {a['cpu_s']}), wall {a['wall_median_s']:.3f} s, "
              f"held-out AUC {a['held_out']['roc_auc']:.3f} Brier {a['held_out']['brier']:.4f}", file=sys.stderr)
    print(f"current / baseline CPU: {result['cpu_ratio']}, cold / baseline {result['cold_cpu_ratio']} "
          f"(load {result['load']})")


if __name__ == "__main__":
    main()
