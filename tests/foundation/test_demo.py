"""`retrylens demo`: the main job end to end, embedded and through Kafka."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_helpers import cli_env
from rich.console import Console

from retrylens.cli import demo_cmds
from retrylens.config import Settings

#: A demo subprocess may take up to its own 600 s: its bound, not pytest-timeout's suite-wide 300 s,
#: decides on a loaded machine (two CI runs side by side).
pytestmark = pytest.mark.timeout(900)


def _demo(env: dict[str, str], *args: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "retrylens", "demo", "--json", *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


START = "2026-11-30T06:00:00+00:00"
LATER = "2026-11-30T13:30:00+00:00"  # the same fleet at another time of day
EXACT = ("calls", "failures", "retries", "retry_successes", "degrades", "handoffs", "tasks", "retry_rate",
         "retry_success_rate", "handoff_rate", "degradation_rate")


@pytest.mark.clickhouse
def test_embedded_demo_runs_the_whole_loop_and_its_numbers_are_the_truth(tmp_path: Path) -> None:
    env = {**os.environ, "RETRYLENS_DATA_DIR": str(tmp_path), "KAFKA_BOOTSTRAP_SERVERS": ""}
    report = _demo(env, "--tasks", "150", "--seed", "3", "--start", START)
    assert report["mode"] == "embedded"
    assert report["events_emitted"] > 150
    assert report["events_stored"] == report["events_emitted"]
    assert {name: report["metrics"][name] for name in EXACT} == {name: report["truth"][name] for name in EXACT}
    # the loop: a model trained on the first half, the second half pre-checked through the API
    assert report["model"]["version"] == "v0001"
    assert report["prechecks"]["checked"] == 75
    assert set(report["prechecks"]["changed"]["success_rate"]) == {"with_prechecks", "without_prechecks"}
    assert Path(report["policy_report"]["html"]).is_file()
    assert report["dashboard"] == f"RETRYLENS_DATA_DIR={tmp_path} {sys.executable} -m retrylens up"
    # Same seed on a fresh store, same run, pre-checks included, whatever the time of day the
    # fleet runs at (on the same store the second run would learn from the first one's history,
    # and its pre-checks would rightly advise otherwise). Before, the model read the hour of
    # day, and the API took it from the wall clock: the same command gave other advice later.
    again = _demo({**env, "RETRYLENS_DATA_DIR": str(tmp_path / "again")}, "--tasks", "150", "--seed", "3",
                  "--start", LATER)
    assert again["fleet"] == report["fleet"]
    assert again["prechecks"] == report["prechecks"]


# slow: CI's locked run only. The demo loop at the floors is the embedded test above; its
# Kafka road (kafka-python's floor is the locked version) adds the producer's lz4 and the
# consumer's msgspec/crc32c, which the quick Kafka tests of the lowest run cover.
@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.clickhouse
def test_demo_through_kafka_stores_every_emitted_event(kafka_settings: Settings) -> None:
    report = _demo(cli_env(kafka_settings), "--tasks", "100", "--seed", "5")
    assert report["mode"] == "kafka"
    assert report["events_stored"] == report["events_emitted"] > 100


def test_demo_rejects_bad_arguments(tmp_path: Path) -> None:
    # In this process (typer's runner): the exit code is the command's, and six CLI start-ups
    # (~3 s of imports each) would test nothing more.
    from typer.testing import CliRunner

    from retrylens.cli.main import app

    env = {"RETRYLENS_DATA_DIR": str(tmp_path)}
    for args in (["--tasks", "0"], ["--driver", "yolo"], ["--scenario", str(tmp_path / "nope.yaml")],
                 ["--learn-share", "1.5"], ["--learn-share", "half"], ["--start", "yesterday"]):
        result = CliRunner().invoke(app, ["demo", *args], env=env)
        assert result.exit_code == 2, (args, result.output, result.exception)


@pytest.mark.clickhouse
def test_a_demo_on_a_store_with_earlier_events_says_its_store_column_counts_them(tmp_path: Path) -> None:
    """Run twice on one data directory, the store column also counts the first run: the
    report must say so instead of showing store ≠ truth without a word."""
    env = {**os.environ, "RETRYLENS_DATA_DIR": str(tmp_path), "KAFKA_BOOTSTRAP_SERVERS": ""}
    first = _demo(env, "--tasks", "30", "--seed", "1", "--learn-share", "0", "--start", START)
    assert first["store_held_before"] == 0
    second = _demo(env, "--tasks", "30", "--seed", "2", "--learn-share", "0", "--start", START)
    assert second["store_held_before"] == first["events_stored"] > 0
    assert second["metrics"]["calls"] > second["truth"]["calls"]
    text = subprocess.run([sys.executable, "-m", "retrylens", "demo", "--tasks", "30", "--seed", "3",
                           "--learn-share", "0", "--start", START], env=env, capture_output=True, text=True,
                          timeout=600)
    assert text.returncode == 0, text.stderr
    shown = " ".join(text.stdout.split())  # rich wraps lines at the terminal's width
    assert "already held" in shown and "fresh RETRYLENS_DATA_DIR" in shown


def _shown(report: dict, monkeypatch: pytest.MonkeyPatch) -> str:
    console = Console(file=io.StringIO(), width=300)
    monkeypatch.setattr(demo_cmds, "out", console)
    demo_cmds._print_report(report)
    return " ".join(console.file.getvalue().split())


def test_a_rerun_on_the_same_store_says_its_model_and_pre_checks_learned_from_earlier_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Run twice with one seed on one data directory, the second model trains on the first run's
    events too (the very tasks it then pre-checks): the README's command gave cost 8.464 USD
    with pre-checks on a fresh directory and 8.336 on the second run, under a line that said
    "trained on 1600 tasks of the first part" (800 were). The report must say what it read."""
    fleet = {"driver": "governor", "policy_id": "p", "policy_version": "1", "tasks": 80, "success_rate": 0.9,
             "attempts": 90, "wasted_attempts": 1, "duplicate_side_effects": 0, "handoffs": 2, "loops": 0,
             "tokens": 1, "cost_usd": 1.0}
    pair = {"with_prechecks": 1.0, "without_prechecks": 1.1}
    report = {"mode": "embedded", "store": "chdb:///x", "events_emitted": 200, "events_stored": 20,
              "store_held_before": 0, "fleet": fleet, "metrics": {}, "truth": {},
              "model": {"version": "v0002", "n_train": 80, "roc_auc": 0.8, "brier": 0.1},
              "prechecks": {"checked": 40, "mean_risk": 0.1, "advice": {}, "changed": {"cost_usd": pair}},
              "dashboard": "retrylens up"}
    first = _shown(report, monkeypatch)
    assert "tasks of the first part" in first and "learned from" not in first and "deduplicated" not in first
    rerun = _shown({**report, "store_held_before": 180}, monkeypatch)
    assert "trained on 80 tasks in the store (this run's first part and earlier runs')" in rerun
    assert "also learned from the 180 events of earlier runs" in rerun
    assert "fresh RETRYLENS_DATA_DIR" in rerun
    assert "200 events emitted, 20 stored (the others were already in the store" in rerun
