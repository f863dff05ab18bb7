"""The risk model's training on one BLAS thread (shipped) vs the process's default threads.

Same process, same data, alternately: ``train_from_traces`` on the 40-trace sample as
shipped (``analytics/blas_threads.py`` limits BLAS/OpenMP to one thread for the fit) and
the same function undecorated (``__wrapped__``), which runs on whatever threads the
process has (OpenBLAS: one per core, unless ``OPENBLAS_NUM_THREADS`` says otherwise; do
not set it for this bench). Figures: median wall and CPU seconds (``time.process_time``:
every thread of the process) per training, and the two models' coefficients must agree.

    python bench/fit_threads.py --json          # {"one_thread": {...}, "default": {...}, ...}
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info

from retrylens.analytics import training
from retrylens.analytics.model_store import ModelStore

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "agent_traces_sample.jsonl"


def _timed(train: Callable[..., training.TrainingResult], folder: Path) -> tuple[float, float, np.ndarray]:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = train(SAMPLE, model_store=ModelStore(folder))
    return time.perf_counter() - wall0, time.process_time() - cpu0, result.model.coef


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="trainings per variant, alternately")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--smoke", action="store_true", help="tiny size: one training per variant")
    args = parser.parse_args(argv)
    if args.smoke:
        args.repeat = 1
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    variants = {"one_thread": training.train_from_traces, "default": training.train_from_traces.__wrapped__}
    figures: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in variants}
    coefs: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            for name, train in variants.items():
                wall, cpu, coefs[name] = _timed(train, Path(tmp) / f"{name}-{i}")
                figures[name]["wall"].append(wall)
                figures[name]["cpu"].append(cpu)
    blas = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    out = {
        name: {"wall_s": round(statistics.median(f["wall"]), 2), "cpu_s": round(statistics.median(f["cpu"]), 2),
               "runs": len(f["wall"])}
        for name, f in figures.items()
    }
    out["process_blas_threads"] = max(blas) if blas else None
    out["cpus"] = os.cpu_count()
    out["same_model"] = bool(np.allclose(coefs["one_thread"], coefs["default"]))
    out["cpu_ratio_default_over_one"] = round(out["default"]["cpu_s"] / out["one_thread"]["cpu_s"], 2)
    if args.json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")
    return 0 if out["same_model"] else 1


if __name__ == "__main__":
    sys.exit(main())
