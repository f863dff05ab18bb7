"""``rules.pollution_rebuild_threshold`` is read: a polluted context is rebuilt (issue 11 item 4).

A task whose loaded history carries error messages and copies starts with a context whose
pollution score is above the threshold; the governor drops them before the attempt runs.
Read back from the stored failure snapshot of the first attempt.
"""

from __future__ import annotations

import random

import pytest

from retrylens.ingest.processor import SourceRef, ValidEvent, process
from retrylens.sdk import Governor, parse_policy
from retrylens.sdk.text.context import ContextBuilder, pollution_score
from retrylens.store.sql import query_rows
from retrylens.testing import capture_events

pytestmark = pytest.mark.clickhouse
HISTORY = [
    {"role": "user", "content": "find flights to Oslo"},
    {"role": "tool", "content": "Error: flight API returned status 503", "error": True},
    {"role": "tool", "content": "Error: flight API returned status 503", "error": True},
    {"role": "assistant", "content": "Here are three flights."},
]


def _first_snapshot(store, project: str, threshold: float) -> dict:
    policy = parse_policy({"backoff": {"jitter": 0.0, "base_ms": 1, "cap_ms": 2},
                           "rules": {"pollution_rebuild_threshold": threshold}})
    with capture_events() as captured:
        g = Governor(policy, project=project, emit=captured.emit, rng=random.Random(3))
        with g.start("book the cheapest one", agent="travel", history=HISTORY) as run:
            attempt = run.begin()
            run.wait(run.fail(attempt, TimeoutError("timed out")))
            run.succeed(run.begin(), "booked")
        rows = [process(value, SourceRef(project, 0, i)) for i, (_, value) in enumerate(captured.records())]
    assert all(isinstance(r, ValidEvent) for r in rows)
    store.insert_rows([r.row for r in rows])
    (row,) = query_rows(store.client, store.sql(
        "SELECT context_message_count, pollution_score, trailing_errors FROM [[db]].events FINAL"
        " WHERE project = {p:String} AND kind = 'attempt_failed'"), {"p": project})
    return row


def test_polluted_history_is_rebuilt_at_the_threshold(store):
    base = ContextBuilder.for_input("book the cheapest one", history=HISTORY).build()
    assert pollution_score(base) >= 0.2  # the default threshold
    kept = _first_snapshot(store, "polluted-kept", threshold=1.0)
    rebuilt = _first_snapshot(store, "polluted-rebuilt", threshold=0.2)
    assert kept["context_message_count"] == len(HISTORY) + 1
    assert rebuilt["context_message_count"] == len(HISTORY) + 1 - 2  # both errors dropped
    assert rebuilt["pollution_score"] < 0.2 <= kept["pollution_score"]


def test_rebuild_keeps_system_prompt_and_input():
    builder = ContextBuilder.for_input("hi", system="be brief", history=[*HISTORY, HISTORY[0]])
    dropped = builder.rebuild()
    assert [m["content"] for m in builder.base] == [
        "be brief", "find flights to Oslo", "Here are three flights.", "hi"]
    assert len(dropped) == 3 and builder.dropped[-3:] == dropped
