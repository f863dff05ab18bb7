"""Failure groups over every project (``retrylens groups`` without ``--project``, the dashboard's
"All projects", ``/v1/fleet/failure-groups``): a group stays within its project.

Planted: the same message fails 3 tasks of ``north`` and 2 of ``south`` (two groups, one per
project, each listing only its own tasks), and a message only ``north`` has.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from factories import make_event

from retrylens.analytics.failure_groups import failure_groups
from retrylens.ingest.processor import SourceRef, process

pytestmark = pytest.mark.clickhouse

SHARED = "disk full on volume data"
ONLY_NORTH = "schema mismatch in ledger"
#: Recent: the message column of old events is cleared by its TTL (example tasks read it).
NOW = datetime.now(UTC).replace(microsecond=0)
BASE_TS = NOW - timedelta(hours=1)


def _failures(project: str, message: str, tasks: int, prefix: str) -> list:
    return [make_event(project=project, task_id=f"{prefix}-{i}", correlation_id=f"{prefix}-{i}/1", attempt=1,
                       kind="attempt_failed", error_type="logic", error_detail={"message": message},
                       ts=BASE_TS + timedelta(minutes=i))
            for i in range(tasks)]


@pytest.fixture
def two_projects(store):
    events = (_failures("north", SHARED, 3, "n") + _failures("south", SHARED, 2, "s")
              + _failures("north", ONLY_NORTH, 1, "n-only"))
    store.insert_rows([process(e.to_json_bytes(), SourceRef("t", 0, i)).row for i, e in enumerate(events)])
    return store


def test_groups_of_every_project_keep_each_project_and_its_own_tasks(two_projects):
    groups = failure_groups(two_projects, None, now=NOW)
    found = {(g.project, g.pattern): g for g in groups}
    assert set(found) == {("north", SHARED), ("south", SHARED), ("north", ONLY_NORTH)}
    assert found["north", SHARED].failures == 3 and sorted(found["north", SHARED].example_tasks) == ["n-0", "n-1", "n-2"]
    assert found["south", SHARED].failures == 2 and sorted(found["south", SHARED].example_tasks) == ["s-0", "s-1"]
    assert sum(n for _, n in found["south", SHARED].daily) == 2
    assert [g.failures for g in groups] == sorted((g.failures for g in groups), reverse=True)


def test_groups_of_a_set_of_projects_read_only_those(two_projects):
    assert {g.project for g in failure_groups(two_projects, ["south"], now=NOW)} == {"south"}
    assert failure_groups(two_projects, [], now=NOW) == []
    assert [g.pattern for g in failure_groups(two_projects, "north", now=NOW)] == [SHARED, ONLY_NORTH]


def test_groups_command_without_a_project_lists_every_project(two_projects, settings):
    from typer.testing import CliRunner

    from retrylens.cli.main import app

    env = {"RETRYLENS_DATA_DIR": str(settings.data_dir), "RETRYLENS_CLICKHOUSE_DSN": settings.clickhouse_dsn,
           "RETRYLENS_CLICKHOUSE_DATABASE": settings.clickhouse_database, "KAFKA_BOOTSTRAP_SERVERS": ""}
    as_json = CliRunner().invoke(app, ["groups", "--json"], env=env)
    assert as_json.exit_code == 0, as_json.output
    assert sorted((g["project"], g["failures"]) for g in json.loads(as_json.stdout)) == [
        ("north", 1), ("north", 3), ("south", 2)]
    text = CliRunner().invoke(app, ["groups"], env=env)
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("north") and SHARED in lines[0]
    assert any(line.startswith("south") and SHARED in line for line in lines)
