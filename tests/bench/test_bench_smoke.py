"""Every bench script runs at a tiny size (``--smoke --json``): it starts, prints its JSON and exits 0.

A bench that rots is found by the next measurement, long after the change that broke it
(``bench/replay.py`` crashed for weeks once the step allowance landed). Run here, a change
that breaks a bench fails CI. Every script under ``bench/`` that can be run (has a
``__main__`` block) is found by itself: a new bench is covered the day it lands, and must
accept ``--smoke`` (tiny size) and ``--json``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# slow: CI's locked run only. A bench is run by hand in the project's locked environment
# (`make bench`, `.venv` installed from the lock), never on the lowest versions, and the code it
# drives is the product's, which the lowest run's own tests prove at the floors; the smoke runs
# (29 processes, each importing the server stack: the 28 without a broker took 116 s of CPU,
# the lowest run's costliest module) keep a bench from rotting, which one run does. (The floor bug a smoke run once found,
# session 14, was in bench/ingest.py's own settings call, not in the product.)
pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if 'if __name__ == "__main__"' in p.read_text())


def _needs(script: Path) -> tuple[str, ...]:
    """What a script's smoke run needs beside the code: its ``SMOKE_NEEDS = ("kafka",)`` line."""
    found = re.search(r"^SMOKE_NEEDS = \(([^)]*)\)", script.read_text(), re.M)
    return tuple(re.findall(r'"(\w+)"', found.group(1))) if found else ()


def _param(script: Path) -> object:
    marks = [pytest.mark.kafka] if "kafka" in _needs(script) else []
    return pytest.param(script, id=script.name, marks=marks)


def test_the_bench_folder_has_scripts_to_run() -> None:
    assert len(SCRIPTS) >= 20 and BENCH / "replay.py" in SCRIPTS


@pytest.mark.parametrize("script", [_param(s) for s in SCRIPTS])
def test_bench_script_runs_at_smoke_size_and_prints_json(script: Path, tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    env = {**os.environ, "RETRYLENS_DATA_DIR": str(tmp_path / "data"), "PYTHONHASHSEED": "0"}
    if "kafka" in _needs(script):
        env["KAFKA_BOOTSTRAP_SERVERS"] = request.getfixturevalue("kafka_bootstrap")
    proc = subprocess.run([sys.executable, str(script), "--smoke", "--json"], capture_output=True, text=True,
                          timeout=240, cwd=tmp_path, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    figures = json.loads(proc.stdout)
    assert figures, proc.stdout[:2000]
