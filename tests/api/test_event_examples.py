"""The README's "Agents in other languages" path, run as written: example payloads, curl, Kafka.

The payloads under ``examples/events/`` must validate against the published JSON Schema
and pass the processor; then ``curl`` posts them to a real ``retrylens serve`` and the
README's ``kcat`` line writes the keyed lines to the real topic (``infra/browser.sh``
installs Debian's kcat), and the stored task timelines are read back. An event sent without ``event_id`` twice is stored once.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import jsonschema
import orjson
import pytest
from apitest_support import ACME, KEYS
from serve_support import running_server

from retrylens.ingest import InvalidMessage, SourceRef, process
from retrylens.schemas.export import SCHEMA_FILE

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "events"
BODIES = ["task_full.json", "task_compact.json", "without_event_id.json"]


def _events(name: str) -> list[dict]:
    return json.loads((EXAMPLES / name).read_text())["events"]


@pytest.mark.parametrize("name", BODIES)
def test_example_payloads_validate_against_the_json_schema_and_the_processor(name):
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    for event in _events(name):
        validator.validate(event)
        outcome = process(orjson.dumps(event), SourceRef("examples", 0, 0))
        assert not isinstance(outcome, InvalidMessage), outcome


def test_the_kafka_lines_are_the_full_task_keyed_by_task_id():
    lines = (EXAMPLES / "task_full.kafka.tsv").read_text().splitlines()
    pairs = [line.split("\t", 1) for line in lines]
    assert [json.loads(value) for _, value in pairs] == _events("task_full.json")
    assert all(key == json.loads(value)["task_id"] for key, value in pairs)


def _timeline(url: str, task_id: str, count: int, project: str = "acme") -> list[dict]:
    deadline, events = time.monotonic() + 60, []
    while time.monotonic() < deadline:
        response = httpx.get(f"{url}/v1/projects/{project}/tasks/{task_id}/events", headers=ACME, timeout=10)
        if response.status_code == 200 and len(events := response.json()["events"]) >= count:
            return events
        time.sleep(0.5)
    raise AssertionError(f"{task_id}: {len(events)} events after 60 s, wanted {count}")


def _kcat(bootstrap: str, topic: str, path: Path) -> None:
    """The README's line: ``kcat -P -b <broker> -t <topic> -K $'\\t' -l <file>``."""
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (infra/browser.sh installs it)"
    subprocess.run([kcat, "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-l", str(path)],
                   check=True, timeout=120, capture_output=True)


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.clickhouse
def test_curl_and_a_kafka_producer_deliver_the_examples_to_a_real_server(tmp_path, kafka_bootstrap):
    suffix = uuid.uuid4().hex[:8]
    topic = f"retrylens.examples.{suffix}"
    env = {"RETRYLENS_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "RETRYLENS_KAFKA_TOPIC": topic,
           "RETRYLENS_KAFKA_DLQ_TOPIC": f"{topic}.dlq", "RETRYLENS_KAFKA_GROUP": f"examples-{suffix}",
           "RETRYLENS_KAFKA_TOPIC_PARTITIONS": "1"}
    with running_server(tmp_path / "data", env) as url:
        for name in BODIES + ["without_event_id.json"]:  # the last one twice
            out = subprocess.run(
                ["curl", "-sS", "-X", "POST", f"{url}/v1/events", "-H", f"X-API-Key: {KEYS['acme']}",
                 "-H", "Content-Type: application/json", "--data-binary", f"@{EXAMPLES / name}"],
                capture_output=True, text=True, check=True, timeout=60)
            answer = json.loads(out.stdout)
            assert answer["rejected"] == [] and answer["road"] == "kafka", answer
        full = _timeline(url, "ts-task-0001", 7)
        assert [e["kind"] for e in full] == [e["kind"] for e in _events("task_full.json")]
        assert [e["attempt"] for e in full] == [0, 1, 1, 1, 2, 2, 2]
        compact = _timeline(url, "ts-task-0002", 1)
        assert [(e["kind"], e["outcome"]) for e in compact] == [("attempt_succeeded", "succeeded")]
        once = _timeline(url, "ts-task-0003", 1)
        time.sleep(2)  # the second copy has had time to arrive
        once = _timeline(url, "ts-task-0003", 1)
        assert len(once) == 1  # sent twice without event_id: derived deterministically, stored once

        # the same task from a Kafka producer, as another project's copy would arrive
        lines = (EXAMPLES / "task_full.kafka.tsv").read_bytes()
        renamed = lines.replace(b"ts-task-0001", b"ts-task-kafka").replace(b"-9f00-0000", b"-9f00-1000")
        produced = tmp_path / "task_kafka.tsv"
        produced.write_bytes(renamed)
        _kcat(kafka_bootstrap, topic, produced)
        via_kafka = _timeline(url, "ts-task-kafka", 7)
        assert [e["kind"] for e in via_kafka] == [e["kind"] for e in full]
        metrics = httpx.get(f"{url}/v1/projects/acme/metrics", params={"source": "raw"}, headers=ACME).json()
        assert metrics["metrics"]["tasks"] == 4
