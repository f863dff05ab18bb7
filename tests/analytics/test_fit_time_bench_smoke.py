"""``bench/fit_time.py --smoke --json`` runs in the suite, so the training-time figures in
``bench/RESULTS.md`` (issue 34: current columns vs the keyword-only baseline) can be reproduced."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "fit_time.py"


@pytest.mark.slow
def test_the_fit_time_bench_runs_both_arms_and_reports_their_cpu_and_held_out_figures() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--smoke", "--json"], capture_output=True, text=True,
                          timeout=280)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    for arm in ("current", "baseline", "cold"):
        assert figures[arm]["cpu_median_s"] > 0 and 0.5 < figures[arm]["held_out"]["roc_auc"] <= 1
    assert figures["cpu_ratio"] > 0 and figures["train_rows"] == int(figures["tasks"] * 0.8)
