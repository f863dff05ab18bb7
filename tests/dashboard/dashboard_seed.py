"""Seed a store with a simulated fleet for the dashboard tests; also runnable as a script.

As a script (the browser test runs it in a child process, since chDB allows one data
directory per process) it seeds ``DATA_DIR`` and prints the expected first-screen figures
as JSON, computed by the analytics layer directly — not by the road the dashboard uses.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import failure_type_distribution, metrics_summary
from retrylens.config import load_settings
from retrylens.ingest.processor import SourceRef, ValidEvent, process
from retrylens.simulation import load_scenario, run_fleet
from retrylens.store import EventStore, open_store

TASKS = 300
SEED = 3


def seed_fleet(store: EventStore, *, tasks: int = TASKS, seed: int = SEED) -> int:
    """Run the default simulated fleet and store its events; returns the number stored."""
    events: list = []
    run_fleet(load_scenario(None), tasks=tasks, seed=seed, emit=events.append)
    rows = []
    for offset, event in enumerate(events):
        result = process(event.to_json_bytes(), SourceRef("dashboard-seed", 0, offset))
        assert isinstance(result, ValidEvent), result
        rows.append(result.row)
    store.insert_rows(rows)
    return len(rows)


def main(data_dir: str, project: str) -> None:
    settings = load_settings(data_dir=Path(data_dir), clickhouse_dsn="", kafka_bootstrap_servers="")
    store = open_store(settings)
    stored = seed_fleet(store)
    metrics = metrics_summary(store, Slice(project=project))
    shares = failure_type_distribution(store, Slice(project=project))
    print(json.dumps({"events": stored, "project": project, "metrics": metrics.as_dict(),
                      "top_error_type": shares[0].error_type if shares else None}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
