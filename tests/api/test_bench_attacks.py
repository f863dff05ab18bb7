"""``bench/attacks.py`` runs end to end at its smoke size (its figures mean nothing there)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: The bench subprocess may take up to its own 600 s: its bound, not pytest-timeout's suite-wide 300 s,
#: decides on a loaded machine (two CI runs side by side).
pytestmark = pytest.mark.timeout(900)

BENCH = Path(__file__).resolve().parents[2] / "bench" / "attacks.py"


@pytest.mark.clickhouse
@pytest.mark.slow  # a real server and nine client processes: ~40 s on a quiet 2-core machine
def test_the_attack_bench_runs_every_attack_against_a_real_server_and_reports_ratios():
    result = subprocess.run([sys.executable, str(BENCH), "--smoke", "--json"], capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(out["attacks"]) == {"gzip_bomb", "otlp_retention", "precheck_features", "deep_nesting"}
    for figures in out["attacks"].values():
        assert {"healthz_ratio", "victim_read_ratio", "attack_answers", "rss_mb_after"} <= set(figures)
    assert set(out["attacks"]["gzip_bomb"]["attack_answers"]) == {"413"}
    assert set(out["attacks"]["precheck_features"]["attack_answers"]) == {"422"}
