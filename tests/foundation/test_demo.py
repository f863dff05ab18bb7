"""`retrylens demo`: the main job end to end, embedded and through Kafka."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_helpers import cli_env

from retrylens.config import Settings


def _demo(env: dict[str, str], *args: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "retrylens", "demo", "--json", *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.clickhouse
def test_embedded_demo_stores_every_emitted_event_and_reports_metrics(tmp_path: Path) -> None:
    env = {**os.environ, "RETRYLENS_DATA_DIR": str(tmp_path), "KAFKA_BOOTSTRAP_SERVERS": ""}
    report = _demo(env, "--tasks", "150", "--seed", "3")
    assert report["mode"] == "embedded"
    assert report["events_emitted"] > 150
    assert report["events_stored"] == report["events_emitted"]
    assert report["metrics"]["calls"] > 0
    assert 0 <= report["metrics"]["retry_rate"] <= 1
    again = _demo(env, "--tasks", "150", "--seed", "3")
    assert again["fleet"] == report["fleet"]  # same seed, same fleet run


@pytest.mark.kafka
@pytest.mark.clickhouse
def test_demo_through_kafka_stores_every_emitted_event(kafka_settings: Settings) -> None:
    report = _demo(cli_env(kafka_settings), "--tasks", "100", "--seed", "5")
    assert report["mode"] == "kafka"
    assert report["events_stored"] == report["events_emitted"] > 100


def test_demo_rejects_bad_arguments(tmp_path: Path) -> None:
    env = {**os.environ, "RETRYLENS_DATA_DIR": str(tmp_path)}
    for args in (["--tasks", "0"], ["--driver", "yolo"], ["--scenario", str(tmp_path / "nope.yaml")]):
        result = subprocess.run([sys.executable, "-m", "retrylens", "demo", *args], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, (args, result.stderr)
