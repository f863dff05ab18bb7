"""bench/suite_cpu.py's plugin: a worker's session teardown is a row of its own, not its last test's.

pytest stops the session fixtures (a shared server, a browser) in the teardown of a worker's
last test, and the plugin counts the CPU of the children reaped during a test: the last test
carried its worker's session servers (session 19 read a 13 s module as 81 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"

SUITE = '''
import subprocess, sys
import pytest

@pytest.fixture(scope="session")
def server():
    yield
    # the session fixture's stop: a child that computes ~0.3 s, reaped here
    subprocess.run([sys.executable, "-c", "import time\\nt = time.process_time()\\n"
                    "while time.process_time() - t < 0.3: pass"], check=True)

def test_first(server):
    assert True

def test_last(server):
    assert True
'''


def test_the_session_teardown_is_its_own_row_and_not_the_last_tests(tmp_path: Path) -> None:
    (tmp_path / "test_tiny.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    rows_dir = tmp_path / "rows"
    env = {**os.environ, "RETRYLENS_SUITE_CPU_DIR": str(rows_dir), "PYTHONPATH": str(BENCH)}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-c", str(tmp_path / "pytest.ini"), str(tmp_path / "test_tiny.py")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [json.loads(line) for line in (rows_dir / "main.jsonl").read_text().splitlines()]
    by_test = {row["test"].rsplit("::", 1)[-1]: row for row in rows}
    assert sorted(by_test) == ["<session teardown>", "test_first", "test_last"]
    assert by_test["<session teardown>"]["cpu"] >= 0.25  # the reaped child's CPU lands here
    assert by_test["test_last"]["cpu"] < 0.2  # and not in the last test
    assert by_test["test_last"]["end"] <= by_test["<session teardown>"]["start"] + 0.01
