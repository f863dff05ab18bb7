"""The failure classifier against its baselines under honest validation, in one run.

Two data sets, the same four candidates on the same folds (:mod:`retrylens.analytics.validation`):

- real agent traces (``../shared/data/agent_traces/dev.jsonl``, else the shipped fixture):
  5 folds stratified and grouped by ``task_key`` — no task on both sides of a fold;
- the simulated fleet (default scenario, governor driver) stored in an embedded chDB
  store and read back as the training path reads it (``stream_examples``: features,
  phase, hour, the fingerprint's record from earlier tasks only): 5 expanding-window
  folds in start order — train on earlier tasks, test on later ones.

``--json`` prints ``roc_auc`` and ``brier`` (mean over the trace folds) of the shipped
model, ``baselines`` with the same figures, and per data set the per-fold figures and
mean ± sd. Usage: ``python bench/classifier.py [--json] [--traces FILE] [--fleet-tasks N]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from retrylens import simulation
from retrylens.analytics import classifier as clf
from retrylens.analytics.training import stream_examples, trace_examples
from retrylens.analytics.validation import CANDIDATES, cross_validate, time_folds
from retrylens.config import load_settings
from retrylens.store import open_store
from retrylens.store.event_table import event_row

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "agent_traces" / "dev.jsonl"
SAMPLE = ROOT / "tests" / "fixtures" / "agent_traces_sample.jsonl"


def traces_cv(path: Path, n_splits: int) -> dict[str, Any]:
    examples = trace_examples(path)
    labels, groups = [e.label for e in examples], [e.group for e in examples]
    splits = clf.folds(labels, groups, n_splits=n_splits)
    report = cross_validate(examples, splits, grouped=True)
    return {"data": str(path), "n": len(examples), "tasks": len(set(groups)),
            "validation": f"{len(splits)} folds stratified and grouped by task_key", **report}


def fleet_cv(tasks: int, seed: int, n_splits: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="retrylens-bench-clf-") as tmp:
        settings = load_settings(data_dir=Path(tmp) / "data", clickhouse_dsn=f"chdb://{tmp}/chdb",
                                 clickhouse_database="bench_classifier", kafka_bootstrap_servers="")
        store = open_store(settings)
        events: list[Any] = []
        noon = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=3)
        simulation.run_fleet(simulation.load_scenario(), tasks=tasks, seed=seed, driver="governor",
                             emit=events.append, start=noon)
        store.insert_rows([event_row(e, topic="fleet", partition=0, offset=i) for i, e in enumerate(events)])
        examples = [e for block in stream_examples(store) for e in block]
    report = cross_validate(examples, time_folds(len(examples), n_splits), grouped=False)
    return {"data": f"simulated fleet, default scenario, {tasks} tasks, seed {seed}", "n": len(examples),
            "validation": f"{n_splits} expanding-window folds in start order (train earlier, test later)", **report}


def _line(name: str, summary: dict[str, Any]) -> str:
    auc, brier = summary["roc_auc"], summary["brier"]
    return f"  {name:13} ROC-AUC {auc['mean']:.3f} ± {auc['sd']:.3f}   Brier {brier['mean']:.3f} ± {brier['sd']:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--traces", type=Path, default=REAL if REAL.exists() else SAMPLE)
    parser.add_argument("--fleet-tasks", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = {"traces": traces_cv(args.traces, args.folds)}
    if args.fleet_tasks:
        result["fleet"] = fleet_cv(args.fleet_tasks, args.seed, args.folds)
    shipped = result["traces"]["summary"]
    out = {
        "roc_auc": shipped["model"]["roc_auc"]["mean"], "brier": shipped["model"]["brier"]["mean"],
        "baselines": {name: {"roc_auc": shipped[name]["roc_auc"]["mean"], "brier": shipped[name]["brier"]["mean"]}
                      for name in CANDIDATES if name != "model"},
        **result, "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for name, part in result.items():
        print(f"{name}: {part['data']} — {part['validation']}")
        for candidate in CANDIDATES:
            print(_line(candidate, part["summary"][candidate]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
