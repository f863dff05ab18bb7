"""Loop and pollution signals (issue 11 item 4), read back from the store.

A governed task whose first attempt calls the same tool with the same arguments three
times in a row and ends its context with error messages; its stored snapshot carries
``trailing_errors``, ``recent_error_share`` and ``repeated_tool_calls``, the pollution
report reads them (not reused idempotency keys), and an alert rule fires on them.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from retrylens.analytics.alerts import AlertRule, evaluate_alerts, save_rule
from retrylens.analytics.filters import Slice
from retrylens.analytics.pollution import pollution_report, task_pollution
from retrylens.ingest.processor import SourceRef, ValidEvent, process
from retrylens.schemas import RetryEvent
from retrylens.schemas.wire import decode_wire
from retrylens.sdk import Governor, parse_policy
from retrylens.sdk.text.context import (
    RECENT_WINDOW,
    recent_error_share,
    snapshot,
    tool_call_digest,
    trailing_errors,
)
from retrylens.store.event_table import EVENT_COLUMN_NAMES
from retrylens.store.migrations.base import MigrationContext
from retrylens.store.migrations.m0010_loop_signals import MIGRATION
from retrylens.store.sql import query_rows
from retrylens.testing import capture_events

pytestmark = pytest.mark.clickhouse
POLICY = parse_policy({"backoff": {"jitter": 0.0, "base_ms": 1, "cap_ms": 2}})
ERROR = {"role": "tool", "content": "Error: upstream returned status 503", "error": True}


def _store_emitted(captured, store, project: str) -> None:
    rows = []
    for offset, (_, value) in enumerate(captured.records()):
        valid = process(value, SourceRef(project, 0, offset))
        assert isinstance(valid, ValidEvent), valid
        rows.append(valid.row)
    store.insert_rows(rows)


def _looping_task(store, project: str = "loops") -> None:
    """Attempt 1: search(q=x) three times, a side effect, two errors at the end; fails.
    Attempt 2: the same side effect again (its idempotency key reused), succeeds."""
    with capture_events() as captured:
        g = Governor(POLICY, project=project, emit=captured.emit, rng=random.Random(7))
        charge = g.side_effect("charge")(lambda amount: f"ok {amount}")

        def work(attempt):
            if attempt.number == 1:
                for _ in range(3):
                    attempt.tool_call("search", '{"q": "x", "page": 1}')
                attempt.tool_call("search", {"page": 1, "q": "x"})  # same call, other spelling
                attempt.tool_call("search", {"q": "y"})
            charge(5)
            if attempt.number == 1:
                attempt.messages.extend([dict(ERROR), dict(ERROR, content="Error: timeout")])
                raise TimeoutError("upstream timed out")
            return "done"

        assert g.call(work, goal="book the room", task_id="task-loop") == "done"
        _store_emitted(captured, store, project)


def test_snapshot_signals_are_computed_on_the_whole_context():
    clean = {"role": "user", "content": "book the room"}
    note = {"role": "system", "content": "Note: the previous try did not succeed (timeout).", "summary": True}
    messages = [clean] * 8 + [ERROR, ERROR, note]
    assert trailing_errors(messages) == 2  # the governor's note is transparent
    assert recent_error_share(messages) == round(2 / RECENT_WINDOW, 4)
    assert trailing_errors([ERROR, clean]) == 0
    calls = [tool_call_digest("a", {"x": 1})] * 3 + [tool_call_digest("a", {"x": 2})]
    shot = snapshot(messages, previous=[], tool_calls=calls)
    assert (shot.trailing_errors, shot.repeated_tool_calls) == (2, 2)


def test_old_events_without_the_signals_stay_valid():
    payload = (
        b'{"project":"p","agent":{"name":"a"},"task_id":"t","correlation_id":"t:1","attempt":1,'
        b'"kind":"attempt_failed","error_type":"timeout","context_snapshot":{"message_count":3}}'
    )
    model, wire = RetryEvent.from_json_bytes(payload), decode_wire(payload)
    assert wire is not None
    for event in (model, wire):
        snap = event.context_snapshot
        assert (snap.trailing_errors, snap.recent_error_share, snap.repeated_tool_calls) == (0, 0.0, 0)


def test_stored_snapshots_carry_the_signals(store):
    _looping_task(store)
    rows = query_rows(store.client, store.sql(
        "SELECT attempt, kind, trailing_errors, recent_error_share, repeated_tool_calls"
        " FROM [[db]].events FINAL WHERE project = 'loops' AND kind = 'attempt_failed'"
    ))
    assert len(rows) == 1
    failed = rows[0]
    assert failed["attempt"] == 1
    assert failed["trailing_errors"] == 2
    # search x4 identical in a row (3 repeats), then search(q=y), then the side effect.
    assert failed["repeated_tool_calls"] == 3
    assert failed["recent_error_share"] > 0


def test_pollution_counts_repeated_calls_not_reused_keys(store):
    _looping_task(store)
    (task,) = task_pollution(store, Slice(project="loops"))
    assert task.repeated_tool_calls == 3  # the side effect's key reused by attempt 2 is no loop
    assert task.trailing_errors == 2
    report = pollution_report(store, Slice(project="loops"))
    effect = {e.signal: e for e in report.effects}["repeated_tool_calls"]
    assert (effect.tasks_with, effect.recovery_with) == (1, 1.0)


def test_alert_rule_on_trailing_errors_fires(store):
    _looping_task(store)
    now = datetime.now(UTC) + timedelta(minutes=1)
    save_rule(store, AlertRule(name="stuck on errors", metric="max_trailing_errors", op=">=", threshold=2,
                               window_minutes=60, where=Slice(project="loops")))
    save_rule(store, AlertRule(name="loops", metric="repeated_tool_calls", op=">", threshold=5,
                               window_minutes=60, where=Slice(project="loops")))
    sent = evaluate_alerts(store, now=now)
    assert [(n.rule_name, n.status, n.value) for n in sent] == [("stuck on errors", "firing", 2.0)]


def test_migration_0010_adds_the_columns(store):
    ctx = MigrationContext(database=store.database)
    for statement in MIGRATION.backwards(ctx):
        store.client.command(statement)
    columns = lambda: [r["name"] for r in query_rows(  # noqa: E731
        store.client, f"SELECT name FROM system.columns WHERE database = '{store.database}' AND table = 'events'"
        " ORDER BY position")]
    assert "trailing_errors" not in columns()
    for statement in MIGRATION.forwards(ctx):
        store.client.command(statement)
    assert columns() == list(EVENT_COLUMN_NAMES)
    source = Path(__file__).resolve().parents[2] / "store" / "migrations" / "m0010_loop_signals.py"
    assert "from .m0" not in source.read_text() and "event_table" not in source.read_text()


def test_a_fresh_store_gets_the_signal_columns_from_migration_0010(store):
    """0001 is frozen (its own column list); the live table equals the live definition."""
    names = [r["name"] for r in query_rows(
        store.client, f"SELECT name FROM system.columns WHERE database = '{store.database}' AND table = 'events'"
        " ORDER BY position")]
    assert names == list(EVENT_COLUMN_NAMES)
    from retrylens.store.migrations import m0001_events

    assert "repeated_tool_calls" not in [name for name, _t, _b in m0001_events.COLUMNS]
    source = Path(m0001_events.__file__).read_text()
    assert "import EVENT_COLUMNS" not in source and "from .m0" not in source
