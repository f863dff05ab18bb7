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
mean ± sd, and ``folds_won`` (folds where the model beat each baseline). ``--fold-seed 0,1,2``
repeats the trace cross-validation with differently shuffled grouped folds: ``traces`` is
the first seed's, ``traces_by_fold_seed`` every seed's, and the top-level ``roc_auc``,
``brier`` and ``baselines`` are then means over the seeds. Usage:
``python bench/classifier.py [--json] [--traces FILE] [--fleet-tasks N] [--seed N] [--fold-seed N[,N...]]``.
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

import numpy as np

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


def traces_cv(path: Path, n_splits: int, fold_seed: int = 0) -> dict[str, Any]:
    examples = trace_examples(path)
    labels, groups = [e.label for e in examples], [e.group for e in examples]
    splits = clf.folds(labels, groups, n_splits=n_splits, seed=fold_seed)
    report = cross_validate(examples, splits, grouped=True)
    return {"data": str(path), "n": len(examples), "tasks": len(set(groups)),
            "validation": f"{len(splits)} folds stratified and grouped by task_key (fold seed {fold_seed})",
            **report, "folds_won": folds_won(report["folds"])}


def folds_won(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per baseline: in how many folds the model's ROC-AUC was higher and its Brier lower."""
    out = {}
    for name in CANDIDATES:
        if name == "model":
            continue
        auc = sum(1 for r in rows if r["model"]["roc_auc"] is not None and r[name]["roc_auc"] is not None
                  and r["model"]["roc_auc"] > r[name]["roc_auc"])
        brier = sum(1 for r in rows if r["model"]["brier"] < r[name]["brier"])
        out[name] = {"roc_auc": auc, "brier": brier, "of": len(rows)}
    return out


def fleet_examples(tasks: int, seed: int) -> list[Any]:
    """Training examples of a simulated fleet (default scenario), read back from a fresh store."""
    with tempfile.TemporaryDirectory(prefix="retrylens-bench-clf-", ignore_cleanup_errors=True) as tmp:
        settings = load_settings(data_dir=Path(tmp) / "data", clickhouse_dsn=f"chdb://{tmp}/chdb",
                                 clickhouse_database="bench_classifier", kafka_bootstrap_servers="")
        store = open_store(settings)
        events: list[Any] = []
        noon = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=3)
        simulation.run_fleet(simulation.load_scenario(), tasks=tasks, seed=seed, driver="governor",
                             emit=events.append, start=noon)
        store.insert_rows([event_row(e, topic="fleet", partition=0, offset=i) for i, e in enumerate(events)])
        return [e for block in stream_examples(store) for e in block]


def fleet_cv(tasks: int, seed: int, n_splits: int) -> dict[str, Any]:
    examples = fleet_examples(tasks, seed)
    report = cross_validate(examples, time_folds(len(examples), n_splits), grouped=False)
    return {"data": f"simulated fleet, default scenario, {tasks} tasks, seed {seed}", "n": len(examples),
            "validation": f"{n_splits} expanding-window folds in start order (train earlier, test later)", **report,
            "folds_won": folds_won(report["folds"])}


def _seeds(value: str) -> list[int]:
    return [int(part) for part in value.split(",") if part.strip()]


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
    parser.add_argument("--fold-seed", type=_seeds, default=[0],
                        help="shuffling seed(s) of the grouped trace folds, comma-separated")
    parser.add_argument("--smoke", action="store_true", help="tiny size: the test suite's smoke run")
    args = parser.parse_args(argv)
    if args.smoke:
        args.traces, args.fleet_tasks, args.folds = SAMPLE, 0, 3
    started = time.perf_counter()
    by_seed = {seed: traces_cv(args.traces, args.folds, seed) for seed in args.fold_seed}
    result: dict[str, Any] = {"traces": by_seed[args.fold_seed[0]]}
    if len(by_seed) > 1:
        result["traces_by_fold_seed"] = by_seed
    if args.fleet_tasks:
        result["fleet"] = fleet_cv(args.fleet_tasks, args.seed, args.folds)

    def mean_over_seeds(name: str, metric: str) -> float:
        return float(np.mean([part["summary"][name][metric]["mean"] for part in by_seed.values()]))

    out = {
        "roc_auc": mean_over_seeds("model", "roc_auc"), "brier": mean_over_seeds("model", "brier"),
        "fold_seeds": args.fold_seed,
        "baselines": {name: {"roc_auc": mean_over_seeds(name, "roc_auc"), "brier": mean_over_seeds(name, "brier")}
                      for name in CANDIDATES if name != "model"},
        **result, "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    parts = [(f"traces, fold seed {seed}", part) for seed, part in by_seed.items()]
    parts += [("fleet", result["fleet"])] if "fleet" in result else []
    for name, part in parts:
        print(f"{name}: {part['data']} — {part['validation']}")
        for candidate in CANDIDATES:
            print(_line(candidate, part["summary"][candidate]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
