"""Failure classes (issue 11 item 6): transient vs permanent, dependency vs input, and
"retries exhausted" as an alertable measure — all read back from stored events."""

from __future__ import annotations

from datetime import timedelta

import pytest
from analytics_eventset import rows_of
from factories import BASE_TS, make_event

from retrylens.analytics.alerts import AlertRule, evaluate_alerts, save_rule
from retrylens.analytics.failure_classes import cause_of, persistence_of
from retrylens.analytics.failure_groups import failure_groups
from retrylens.analytics.filters import Slice
from retrylens.analytics.fingerprints import (
    fingerprint_failures,
    fingerprint_stats,
    top_failing_fingerprints,
)
from retrylens.analytics.pollution import signal_measures
from retrylens.api.serialize import plain

pytestmark = pytest.mark.clickhouse
FP_BIG, FP_OK, FP_BAD = "a" * 16, "b" * 16, "c" * 16


def _failure(task: str, n: int, error: str, message: str, dependency: str, fingerprint: str, minute: int):
    return make_event(project="classes", task_id=task, correlation_id=f"{task}/{n}", attempt=n,
                      kind="attempt_failed", error_type=error, error_detail={"message": message},
                      dependency=dependency, input_fingerprint=fingerprint,
                      ts=BASE_TS + timedelta(minutes=minute))


def _events():
    return [
        # one big input times out on two search backends: the input, though timeouts are transient
        _failure("t1", 1, "timeout", "search timed out after 30s", "search-a", FP_BIG, 1),
        _failure("t1", 2, "timeout", "search timed out after 30s", "search-b", FP_BIG, 2),
        # two inputs rate-limited by the one model: the dependency
        _failure("t2", 1, "rate_limit", "429 Too Many Requests", "llm", FP_OK, 3),
        _failure("t3", 1, "rate_limit", "429 Too Many Requests", "llm", FP_BIG, 4),
        # a validation failure: permanent, the input
        _failure("t4", 1, "validation", "field 'total' must be positive", "llm", FP_BAD, 5),
        make_event(project="classes", task_id="t1", correlation_id="t1/2", attempt=2, kind="decision",
                   decision="give_up", decision_reason="timeout retry cap reached (1/1 retries)",
                   ts=BASE_TS + timedelta(minutes=2)),
        make_event(project="classes", task_id="t4", correlation_id="t4/1", attempt=1, kind="decision",
                   decision="give_up", decision_reason="validation: not retryable",
                   ts=BASE_TS + timedelta(minutes=5)),
    ]


def test_taxonomy_rules():
    assert persistence_of(["timeout", "rate_limit"]) == "transient"
    assert persistence_of(["timeout", "logic"]) == "permanent"
    assert persistence_of(["unknown"]) == "unknown"
    assert cause_of(["server_error"]) == "dependency"
    assert cause_of(["server_error"], dependencies_per_input=2) == "input"
    assert cause_of(["schema_mismatch", "timeout"]) == "input"


def test_failure_groups_carry_persistence_and_cause(store):
    store.insert_rows(rows_of(_events()))
    store.insert_rows(rows_of(_events()[:2], first_offset=100))  # re-sent: nothing changes
    groups = {g.error_type: g for g in failure_groups(store, "classes", include_noise=True,
                                                        now=BASE_TS + timedelta(days=1))}
    assert (groups["timeout"].persistence, groups["timeout"].cause) == ("transient", "input")
    assert groups["timeout"].dependencies_per_input == 2
    assert (groups["rate_limit"].persistence, groups["rate_limit"].cause) == ("transient", "dependency")
    assert (groups["validation"].persistence, groups["validation"].cause) == ("permanent", "input")
    shown = plain(groups["timeout"])  # what the API's failure-group endpoint returns
    assert (shown["persistence"], shown["cause"], shown["dependencies_per_input"]) == ("transient", "input", 2)


def test_fingerprints_carry_persistence_and_cause(store):
    store.insert_rows(rows_of(_events()))
    top = {s.fingerprint: s for s in top_failing_fingerprints(store, "classes")}
    assert top[FP_BIG].failed_dependencies == 3 and top[FP_BIG].cause == "input"
    assert (top[FP_OK].persistence, top[FP_OK].cause) == ("transient", "dependency")
    assert (top[FP_BAD].persistence, top[FP_BAD].cause) == ("permanent", "input")
    assert fingerprint_stats(store, "classes", FP_OK) == top[FP_OK]
    assert fingerprint_failures(store, "classes", FP_BIG) == 3


def test_failed_dependencies_read_for_the_whole_project_equal_those_read_by_list(store, monkeypatch):
    """A long list of fingerprints is answered by one grouped read of the project (cheaper than
    binding the list): the same figures, and another project's failures of the same input stay out."""
    from retrylens.analytics import fingerprints

    store.insert_rows(rows_of(_events()))
    elsewhere = _failure("t9", 1, "timeout", "search timed out", "search-c", FP_BIG, 9).model_copy(
        update={"project": "other"})
    store.insert_rows(rows_of([elsewhere], first_offset=50))
    by_list = top_failing_fingerprints(store, "classes", min_failures=0)
    monkeypatch.setattr(fingerprints, "IN_LIST_MAX", 0)
    whole_project = top_failing_fingerprints(store, "classes", min_failures=0)
    assert whole_project == by_list
    assert {s.fingerprint: s.failed_dependencies for s in whole_project} == {FP_BIG: 3, FP_OK: 1, FP_BAD: 1}


def test_retries_exhausted_is_its_own_alertable_measure(store):
    store.insert_rows(rows_of(_events()))
    where = Slice(project="classes", start=BASE_TS, end=BASE_TS + timedelta(hours=1))
    assert signal_measures(store, where)[""]["retries_exhausted"] == 1  # t1's cap, not t4's give-up
    save_rule(store, AlertRule(name="exhausted", metric="retries_exhausted", op=">=", threshold=1,
                               window_minutes=60, where=Slice(project="classes")))
    sent = evaluate_alerts(store, now=BASE_TS + timedelta(minutes=30))
    assert [(n.rule_name, n.status, n.value) for n in sent] == [("exhausted", "firing", 1.0)]


def _governor_budget_reasons() -> list[str]:
    """The stop reasons the governor gives when a step cap, the task retry allowance or a
    fixed attempt count runs out (issue 24), produced by the SDK itself."""
    import random
    from datetime import UTC, datetime

    from retrylens.errors import TaskStopped
    from retrylens.sdk import Governor
    from retrylens.sdk.core.budget import TaskLedger
    from retrylens.sdk.core.policy import RetryPolicy, TaskBudget

    def down(_: int) -> None:
        raise TimeoutError("down")

    gov = Governor.with_virtual_time(RetryPolicy(), start=datetime(2026, 1, 1, tzinfo=UTC),
                                     rng=random.Random(1))
    with pytest.raises(TaskStopped) as stopped:
        gov.call(lambda: gov.step("lookup", down, 0), goal="look up", agent="ops")
    ledger = TaskLedger(started_at=0.0, attempts=5, steps=0)
    reasons = [stopped.value.verdict.reason, ledger.exhausted(TaskBudget(), 0.0),
               ledger.exhausted(TaskBudget(max_attempts=5), 0.0)]
    assert all(reasons)
    return [r for r in reasons if r]


def test_every_budget_stop_of_the_governor_counts_as_retries_exhausted(store):
    reasons = _governor_budget_reasons()
    events = [make_event(project="budgets", task_id=f"b{i}", correlation_id=f"b{i}/1", attempt=1,
                         kind="decision", decision="give_up", decision_reason=reason,
                         ts=BASE_TS + timedelta(minutes=i))
              for i, reason in enumerate(reasons)]
    store.insert_rows(rows_of(events))
    where = Slice(project="budgets", start=BASE_TS, end=BASE_TS + timedelta(hours=1))
    assert signal_measures(store, where)[""]["retries_exhausted"] == len(reasons) == 3
