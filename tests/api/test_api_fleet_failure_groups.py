"""``/v1/fleet/failure-groups``: the failure groups of every project the caller's key may read
(``retrylens groups`` without ``--project`` and the dashboard's "All projects" read it)."""

from __future__ import annotations

import pytest
from apitest_support import ACME, GLOBEX

from retrylens.analytics.failure_groups import failure_groups
from retrylens.api.auth import local_token
from retrylens.sdk.transport.client import RetryLensClient

pytestmark = pytest.mark.clickhouse


def _ids(groups) -> list[tuple[str, str]]:
    return [(g["project"], g["group_id"]) for g in groups]


def test_fleet_failure_groups_with_the_local_token_are_every_projects_groups(client, api_settings, seeded):
    api = RetryLensClient("http://testserver", local_token(api_settings), http=client)
    every = api.failure_groups(None, limit=500)
    assert {g["project"] for g in every} == {"acme", "globex"}
    assert _ids(every) == [(g.project, g.group_id) for g in failure_groups(seeded, None, limit=500)]


def test_fleet_failure_groups_with_a_project_key_are_only_its_projects(client, seeded):
    for headers, project in ((ACME, "acme"), (GLOBEX, "globex")):
        answer = client.get("/v1/fleet/failure-groups", params={"limit": 500}, headers=headers)
        assert answer.status_code == 200, answer.text
        assert _ids(answer.json()) == [(g.project, g.group_id) for g in failure_groups(seeded, project, limit=500)]
