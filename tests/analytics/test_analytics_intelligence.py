"""Failure groups, fingerprints and pollution signals on the fixed event set."""

from __future__ import annotations

import pytest
from analytics_eventset import FP_CODE, FP_PLAN, T0, load

from retrylens.analytics.failure_groups import failure_groups, normalise_message
from retrylens.analytics.filters import Slice
from retrylens.analytics.fingerprints import (
    fingerprint_failures,
    fingerprint_stats,
    top_failing_fingerprints,
)
from retrylens.analytics.pollution import pollution_report, task_pollution

pytestmark = pytest.mark.clickhouse


@pytest.mark.parametrize(
    ("message", "normalised"),
    [
        ("Timeout after 30s calling https://x.io/a?id=3 at 2024-05-01T12:00:03Z", "timeout after <n> calling <url> at <ts>"),
        ("user 'bob' not found in /var/lib/app/users.db (id 9f8e7d6c5b4a)", "user '<v>' not found in <path> (id <hex>)"),
        ("Request 123e4567-e89b-12d3-a456-426614174000 failed: 503", "request <id> failed: <n>"),
        ('KeyError:  "total"   missing in record 42', 'keyerror: "<v>" missing in record <n>'),
    ],
)
def test_message_normalisation(store, message, normalised):
    assert normalise_message(store, message) == normalised


def test_groups_merge_messages_that_differ_only_in_ids(store):
    load(store)
    groups = failure_groups(store, "alpha", now=T0)
    invalid = [g for g in groups if g.error_type == "logic"]
    assert len(invalid) == 1
    assert invalid[0].failures == 2 and invalid[0].tasks == 1
    assert invalid[0].pattern == "invalid plan for order <n>: missing field '<v>'"
    assert invalid[0].example_tasks == ["task-B"]
    assert invalid[0].first_seen < invalid[0].last_seen
    assert groups[0] is not None and groups[0].failures == 2  # most failures first
    assert sum(n for _, n in invalid[0].daily) == 2


def test_rate_limit_noise_is_kept_apart(store):
    load(store)
    bugs = {g.error_type for g in failure_groups(store, "alpha", now=T0)}
    everything = {g.error_type: g for g in failure_groups(store, "alpha", include_noise=True, now=T0)}
    assert "rate_limit" not in bugs and everything["rate_limit"].is_noise
    assert everything["rate_limit"].failures == 1  # duplicates of task C not counted twice
    assert not everything["timeout"].is_noise


def test_group_trend_is_new_in_the_recent_window(store):
    load(store)
    group = failure_groups(store, "alpha", error_type="timeout", now=T0)[0]
    assert group.recent_failures == 1 and group.previous_failures == 0 and group.trend == "new"


def test_fingerprint_failure_counts_and_recent_error_types(store):
    load(store)
    stats = fingerprint_stats(store, "alpha", FP_PLAN)
    assert (stats.failures, stats.attempts, stats.tasks, stats.tasks_failed) == (3, 4, 2, 1)
    assert stats.recent_error_types == ["logic", "timeout"]
    assert stats.known_bad() and fingerprint_failures(store, "alpha", FP_PLAN) == 3
    assert fingerprint_stats(store, "alpha", FP_CODE).failures == 3
    assert fingerprint_stats(store, "beta", FP_PLAN).failures == 1  # projects never mix
    unknown = fingerprint_stats(store, "alpha", "0" * 32)
    assert unknown.failures == 0 and unknown.failure_rate is None and not unknown.known_bad()


def test_top_failing_fingerprints(store):
    load(store)
    top = top_failing_fingerprints(store, "alpha", min_failures=1)
    assert {s.fingerprint for s in top} == {FP_PLAN, FP_CODE}


def test_pollution_signals_per_task(store):
    load(store)
    tasks = {t.task_id: t for t in task_pollution(store, Slice(project="alpha"))}
    assert tasks["task-A"].carried_errors == 1 and tasks["task-A"].context_growth == pytest.approx(1.5)
    assert tasks["task-B"].duplicate_messages == 1 and tasks["task-B"].carried_errors == 0
    # task-C's second attempt reuses its side effect's idempotency key: a guarded retry,
    # not a loop (identical consecutive tool calls within an attempt; test_loop_signals.py)
    assert tasks["task-C"].repeated_tool_calls == 0
    assert tasks["task-D"].score == 0 and tasks["task-E"].score == 0
    assert tasks["task-A"].score == pytest.approx(0.35)
    assert tasks["task-B"].loop_failures == 2 and not tasks["task-B"].looping


def test_pollution_report_relates_signals_to_recovery(store):
    load(store)
    report = pollution_report(store, Slice(project="alpha"))
    assert report.tasks == 5 and report.polluted_tasks == 1
    effect = {e.signal: e for e in report.effects}["duplicate_messages"]
    # retried tasks: A (recovered), B (duplicate messages, not recovered), C (recovered)
    assert (effect.tasks_with, effect.recovery_with) == (1, 0.0)
    assert (effect.tasks_without, effect.recovery_without) == (2, 1.0)
