"""``bench/redaction_corpus.py --smoke --json`` runs in the suite, so the figures it prints in
``bench/RESULTS.md`` can be reproduced: no false positive on the ordinary corpus, no leak of
a planted item."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "redaction_corpus.py"


def test_the_redaction_bench_runs_and_finds_no_false_positive_and_no_leak() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--smoke", "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["ordinary_texts"] >= 50 and figures["planted_texts"] >= 20
    assert (figures["false_positive_rate"], figures["changed"]) == (0.0, [])
    assert (figures["leak_rate"], figures["leaked"]) == (0.0, [])
