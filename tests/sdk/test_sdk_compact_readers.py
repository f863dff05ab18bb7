"""Every reader counts a compact first-try success exactly like the four events it stands for.

Two projects get the same tasks through the real serializer, processor and store:
``full`` records each clean first-try success as task_started, attempt_started,
attempt_succeeded and task_finished (the TaskRun API without the compact form), ``compact``
records it as ``governor.call`` does, one event. Failing tasks take the full path in
both. Metrics (raw and rollup), task costs, training examples, failure patterns,
fingerprint history, pollution, the evaluation history and the task story must agree.
"""

from __future__ import annotations

import random
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from retrylens.analytics.filters import Slice
from retrylens.analytics.fingerprints import fingerprint_stats
from retrylens.analytics.metrics import metrics_summary, task_costs
from retrylens.analytics.patterns import failure_patterns
from retrylens.analytics.pollution import pollution_report
from retrylens.analytics.training import stream_examples
from retrylens.dashboard.story import build_story
from retrylens.evaluation.history import build_history, read_frame
from retrylens.ingest.processor import SourceRef, ValidEvent, process
from retrylens.schemas import EventKind, RetryEvent
from retrylens.sdk import Governor, TaskStopped, parse_policy
from retrylens.sdk.text.features import input_fingerprint
from retrylens.sdk.transport.serializer import event_bytes
from retrylens.store import EventStore

pytestmark = pytest.mark.clickhouse

NO_JITTER = parse_policy({"backoff": {"jitter": 0.0}})  # the two projects draw different ids
START = (datetime.now(UTC) - timedelta(hours=3)).replace(microsecond=0)
#: (goal, agent, failures before success; None = never succeeds)
TASKS: list[tuple[str, str, int | None]] = [
    ("Refund order A-17 for the customer", "support", 0),
    ("Summarise every ticket since Monday", "support", 0),
    ("Export the monthly report as CSV", "coder", 0),
    ("Export the monthly report as CSV", "coder", 1),
    ("Cancel order 9 and notify the customer", "support", None),
    ("Refund order A-17 for the customer", "support", 0),
]


def _work(failures: int | None):  # noqa: ANN202
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        if failures is None or len(calls) <= failures:
            raise TimeoutError("model timed out after 30 s")
        return "ok"

    return fn


def _record(project: str, *, compact: bool) -> list[RetryEvent]:
    events: list[RetryEvent] = []
    governor = Governor.with_virtual_time(
        NO_JITTER, start=START, project=project, emit=events.append, rng=random.Random(5)
    )
    for goal, agent, failures in TASKS:
        if failures == 0 and not compact:
            with governor.start(goal, agent=agent, dependency="gpt") as run:
                run.succeed(run.begin())
            continue
        try:
            governor.call(_work(failures), goal=goal, agent=agent, dependency="gpt")
        except TaskStopped:
            pass
        governor.clock.advance(1.0)
    return events


@pytest.fixture
def recorded(store: EventStore) -> EventStore:
    rows = []
    for project, compact in (("full", False), ("compact", True)):
        events = _record(project, compact=compact)
        kinds = [e.kind for e in events]
        assert kinds.count(EventKind.TASK_FINISHED) == (2 if compact else 6)
        for offset, event in enumerate(events):
            valid = process(event_bytes(event), SourceRef(project, 0, offset))
            assert isinstance(valid, ValidEvent), valid
            rows.append(valid.row)
    store.insert_rows(rows)
    return store


def _without(record: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in names}


@pytest.mark.parametrize("source", ["raw", "rollup"])
def test_metrics_count_a_compact_task_as_one_call_and_one_task(
    recorded: EventStore, source: str
) -> None:
    full = metrics_summary(recorded, Slice(project="full"), source=source)  # type: ignore[arg-type]
    compact = metrics_summary(recorded, Slice(project="compact"), source=source)  # type: ignore[arg-type]
    assert compact == full
    assert (compact.tasks, compact.calls) == (
        6,
        4 + 2 + 4,
    )  # 4 clean, 1 retried once, 1 failing 4 times


def test_task_costs_give_a_compact_task_its_outcome_and_attempt(recorded: EventStore) -> None:
    def costs(project: str) -> list[dict[str, Any]]:
        rows = task_costs(recorded, Slice(project=project), only_retried=False)
        return sorted((_without(asdict(c), "project", "task_id") for c in rows), key=repr)

    assert costs("compact") == costs("full")
    assert sum(c["outcome"] == "succeeded" and c["attempts"] == 1 for c in costs("compact")) == 4


def test_training_examples_take_features_and_label_from_a_compact_task(
    recorded: EventStore,
) -> None:
    def examples(project: str) -> list[tuple[Any, ...]]:
        found = [e for block in stream_examples(recorded, Slice(project=project)) for e in block]
        return sorted(
            (
                repr(sorted(e.features.items())),
                e.label,
                e.context.phase,
                e.context.fingerprint_tasks,
                e.context.fingerprint_failed_tasks,
            )
            for e in found
        )

    assert examples("compact") == examples("full") and len(examples("compact")) == 6


def test_failure_patterns_fingerprints_and_pollution_agree(recorded: EventStore) -> None:
    def patterns(project: str) -> list[tuple[str, int, int]]:
        found = failure_patterns(
            recorded, Slice(project=project), min_support=1, min_lift=0.0, limit=1000
        )
        return sorted((p.item, p.support, p.failures) for p in found)

    assert patterns("compact") == patterns("full") and patterns("full")
    for goal in {goal for goal, _, _ in TASKS}:
        fp = input_fingerprint(goal)
        full, compact = (
            fingerprint_stats(recorded, "full", fp),
            fingerprint_stats(recorded, "compact", fp),
        )
        assert _without(asdict(compact), "project", "first_seen", "last_seen") == _without(
            asdict(full), "project", "first_seen", "last_seen"
        )
    assert pollution_report(recorded, Slice(project="compact")) == pollution_report(
        recorded, Slice(project="full")
    )


def test_the_evaluation_history_sees_a_compact_task_as_finished_and_succeeded(
    recorded: EventStore,
) -> None:
    full, compact = (build_history(read_frame(recorded, project=p)) for p in ("full", "compact"))
    assert compact.n_tasks == full.n_tasks == 6 and compact.n_attempts == full.n_attempts
    assert sorted(compact.counts) == sorted(full.counts)
    assert compact.succeeded.sum() == full.succeeded.sum() == 5


def test_the_task_story_of_a_compact_task_shows_its_outcome_and_attempt(
    recorded: EventStore,
) -> None:
    rows = recorded.client.query(
        recorded.sql(
            "SELECT task_id FROM [[db]].events FINAL WHERE project = 'compact' AND outcome = 'succeeded'"
            " AND kind = 'attempt_succeeded'"
        )
    ).result_rows
    assert len(rows) == 4
    story = build_story("compact", rows[0][0], recorded.task_events("compact", rows[0][0]))
    assert story.outcome == "succeeded" and [(a.attempt, a.status) for a in story.attempts] == [
        (1, "succeeded")
    ]
