"""Pre-checks are stored, joined to their tasks' outcomes and monitored (API and store roads).

A real governor asks the real API app (the SDK's :class:`Preflight` over a test client),
runs its tasks, and its events are stored; the stored pre-checks then say what each task
did after the advice, and the monitor's figures and a calibration-drift alert are read
from them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from apitest_support import ACME, insert
from factories import make_event
from fastapi.testclient import TestClient

from retrylens.analytics import alerts as alerting
from retrylens.analytics import prechecks
from retrylens.analytics.filters import Slice
from retrylens.api.app import create_app
from retrylens.sdk import Governor, RetryPolicy
from retrylens.sdk.core.preflight import Preflight
from retrylens.sdk.transport.handoff import CallbackChannel
from retrylens.testing import capture_events

pytestmark = pytest.mark.clickhouse
RISKY = "Migrate the legacy invoice refund ledger via the browser"


def _run_tasks(app, store, outcomes: list[bool], *, text: str = RISKY) -> list[str]:
    """One governed task per outcome (True = it succeeds), pre-checked through the API; events stored."""
    task_ids = []
    with TestClient(app, headers=ACME) as http, capture_events() as captured:
        governor = Governor(RetryPolicy(), project="acme", emit=captured.emit, handoff=CallbackChannel(list().append),
                            preflight=Preflight("http://testserver", client=http))
        for i, ok in enumerate(outcomes):
            task_id = f"pc-{i:03d}"
            task_ids.append(task_id)

            def work(ok: bool = ok) -> str:
                if not ok:
                    raise ValueError("no such record")  # a logic failure: not retried
                return "done"

            try:
                governor.call(work, goal=f"{text} #{i % 3}", agent="planner", task_id=task_id)
            except Exception:  # noqa: BLE001, S110 - the outcome is read back from the events
                pass
    insert(store, captured.events)
    return task_ids


def test_every_precheck_is_stored_with_its_tasks_outcome_and_whether_the_advice_was_applied(app, client, seeded):
    task_ids = _run_tasks(app, seeded, [True, False, True, False])
    rows = client.get("/v1/projects/acme/prechecks", headers=ACME).json()
    assert sorted(r["task_id"] for r in rows) == task_ids
    by_task = {r["task_id"]: r for r in rows}
    for task_id, ok in zip(task_ids, [True, False, True, False], strict=True):
        row = by_task[task_id]
        assert row["project"] == "acme" and row["agent"] == "planner" and row["model_version"] == "none"
        assert len(row["input_fingerprint"]) == 32 and 0 <= row["risk"] <= 1 and row["precheck_id"]
        assert row["failed"] is (not ok) and row["outcome"] == ("succeeded" if ok else row["outcome"])
        assert row["applied"] is True  # the SDK applied the answer (its note is on task_started)
    # stored, not held by this process: a new app over the same store reads them too
    with TestClient(create_app(app.state.settings, seeded)) as other:
        assert len(other.get("/v1/projects/acme/prechecks", headers=ACME).json()) == 4


def test_a_precheck_whose_task_never_reported_has_no_outcome_and_is_not_judged(client, seeded):
    client.post("/v1/precheck", headers=ACME, json={"project": "acme", "agent": "planner", "task_input": "x",
                                                     "task_id": "never-ran"})
    (row,) = client.get("/v1/projects/acme/prechecks", headers=ACME).json()
    assert (row["task_id"], row["outcome"], row["failed"], row["applied"]) == ("never-ran", "", None, None)
    assert prechecks.judge([row])["judged"] == 0


def test_the_monitor_shows_calibration_and_auc_over_time_and_advice_followed_vs_outcome(app, client, seeded):
    _run_tasks(app, seeded, [True, False, False, True, False])
    monitor = client.get("/v1/projects/acme/prechecks/monitor", headers=ACME).json()
    (bucket,) = monitor["over_time"]
    assert bucket["prechecks"] == bucket["judged"] == 5
    assert bucket["observed"] == pytest.approx(3 / 5)
    assert bucket["calibration_gap"] == pytest.approx(abs(bucket["mean_risk"] - 3 / 5))
    assert monitor["advice"] and sum(a["tasks"] for a in monitor["advice"] if a["followed"]) >= 5
    # the same figures on the store road
    direct = prechecks.calibration_over_time(seeded, "acme")
    assert direct[0]["judged"] == 5 and direct[0]["observed"] == pytest.approx(3 / 5)


def test_auc_by_ranks_matches_the_definition() -> None:
    assert prechecks.auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75)
    assert prechecks.auc([0, 1], [0.5, 0.5]) == pytest.approx(0.5)
    assert prechecks.auc([1, 1], [0.1, 0.2]) is None


def test_an_alert_rule_fires_on_calibration_drift(app, seeded):
    _run_tasks(app, seeded, [False] * 6)  # every task fails; without a model the risk stays near the base rate
    app.state.precheck_log.flush()
    rule = alerting.AlertRule(name="risk model drifts", metric="calibration_gap", op=">", threshold=0.3,
                              window_minutes=60, where=Slice(project="acme"), min_calls=5)
    alerting.save_rule(seeded, rule)
    (fired,) = alerting.evaluate_alerts(seeded, now=datetime.now(UTC) + timedelta(seconds=1))
    assert fired.status == "firing" and fired.value > 0.3 and "calibration_gap" in fired.message
    calm = alerting.AlertRule(name="calm", metric="calibration_gap", op=">", threshold=0.3, window_minutes=60,
                              where=Slice(project="acme"), min_calls=50)  # too few judged pre-checks
    assert calm.breached(prechecks.precheck_measures(seeded, project="acme", agent=None,
                                                     start=datetime.now(UTC) - timedelta(hours=1),
                                                     end=datetime.now(UTC) + timedelta(seconds=1))[""])[0] is False


def _ran_earlier(store, hour_ago: int, outcomes: list[bool], *, answered: datetime) -> None:
    """Tasks that ran ``hour_ago`` hours before ``answered`` (task_started, task_finished), each
    pre-checked at ``answered`` with risk 0.1: a simulated fleet pre-checked in one burst, as the
    demo does (the API stamps its answer; the tasks carry the simulated clock)."""
    events, rows = [], []
    for i, ok in enumerate(outcomes):
        task_id, at = f"h{hour_ago}-{i:02d}", answered - timedelta(hours=hour_ago, minutes=-i)
        events += [make_event(task_id=task_id, correlation_id=f"{task_id}/0", kind="task_started", ts=at),
                   make_event(task_id=task_id, correlation_id=f"{task_id}/0", kind="task_finished", ts=at,
                              outcome="succeeded" if ok else "failed")]
        rows.append(prechecks.PrecheckRow(precheck_id=f"pc-{task_id}", ts=answered, project="acme", agent="planner",
                                          task_id=task_id, input_fingerprint="f" * 32, risk=0.1, model_version="v1",
                                          known_bad=False, advice=()))
    insert(store, events)
    prechecks.write_prechecks(store, rows)


def test_a_calibration_drift_rule_judges_the_hour_its_tasks_ran_not_when_they_were_prechecked(store):
    # On the hour, so each burst's ten minutes of tasks fall in one clock hour whatever the
    # minute the test runs at (from minute 51 on they used to straddle two hourly buckets).
    answered = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    _ran_earlier(store, 3, [False] * 10, answered=answered)  # risk 0.1, all failed: off by 0.9
    _ran_earlier(store, 1, [True] * 9 + [False], answered=answered)  # risk 0.1, one in ten failed: on the mark
    rule = alerting.AlertRule(name="risk model drifts", metric="calibration_gap", op=">", threshold=0.3,
                              window_minutes=60, where=Slice(project="acme"), min_calls=5)
    alerting.save_rule(store, rule)
    bad_hour_ends = answered - timedelta(hours=2)
    (fired,) = alerting.evaluate_alerts(store, now=bad_hour_ends)
    assert fired.status == "firing" and fired.value == pytest.approx(0.9)
    (resolved,) = alerting.evaluate_alerts(store, now=answered - timedelta(minutes=1))  # the calm hour
    assert resolved.status == "resolved" and resolved.value == pytest.approx(0.0)
    assert alerting.evaluate_alerts(store, now=answered + timedelta(minutes=5)) == []  # both hours: no new firing
    hours = {p["bucket"]: p["calibration_gap"] for p in prechecks.calibration_over_time(store, "acme", now=answered)}
    assert sorted(round(gap, 6) for gap in hours.values()) == [0.0, 0.9] and len(hours) == 2


def test_the_fleet_monitor_pools_the_projects_the_key_reads_and_no_other(app, store):
    from retrylens.api.auth import local_token

    answered = datetime.now(UTC).replace(microsecond=0)
    _ran_earlier(store, 2, [False] * 6, answered=answered)  # acme: 6 judged, all failed
    prechecks.write_prechecks(store, [prechecks.PrecheckRow(
        precheck_id="pc-globex", ts=answered, project="globex", agent="planner", task_id="g-1",
        input_fingerprint="f" * 32, risk=0.5, model_version="v1", known_bad=False, advice=())])
    insert(store, [make_event(project="globex", task_id="g-1", correlation_id="g-1/0", kind="task_finished",
                              ts=answered - timedelta(hours=2), outcome="succeeded")])
    with TestClient(app) as http:
        acme = http.get("/v1/fleet/prechecks/monitor", headers=ACME).json()
        everyone = http.get("/v1/fleet/prechecks/monitor",
                            headers={"X-API-Key": local_token(app.state.settings)}).json()
    assert acme["projects"] == ["acme"] and sum(p["judged"] for p in acme["over_time"]) == 6
    assert everyone["projects"] == "all" and sum(p["judged"] for p in everyone["over_time"]) == 7
    assert everyone["over_time"] == [{**p, "bucket": p["bucket"].isoformat()} for p in
                                     prechecks.calibration_over_time(store, None)]


def test_a_calibration_rule_counts_only_pre_checks_whose_tasks_ended_toward_min_calls(store):
    """Three pre-checked tasks failed (risk 0.1: off by 0.9) and seven are still running: a
    rule needing five judged pre-checks stays quiet; once two more end, it fires."""
    answered = datetime.now(UTC).replace(microsecond=0)
    _ran_earlier(store, 1, [False] * 3, answered=answered)
    running = [make_event(task_id=f"run-{i}", correlation_id=f"run-{i}/0", kind="task_started",
                          ts=answered - timedelta(minutes=50 - i)) for i in range(7)]
    insert(store, running)
    prechecks.write_prechecks(store, [
        prechecks.PrecheckRow(precheck_id=f"pc-run-{i}", ts=answered, project="acme", agent="planner",
                              task_id=f"run-{i}", input_fingerprint="f" * 32, risk=0.1, model_version="v1",
                              known_bad=False, advice=()) for i in range(7)])
    rule = alerting.AlertRule(name="risk model drifts", metric="calibration_gap", op=">", threshold=0.3,
                              window_minutes=120, where=Slice(project="acme"), min_calls=5)
    alerting.save_rule(store, rule)
    assert alerting.evaluate_alerts(store, now=answered) == []  # 3 judged of 10 pre-checked
    insert(store, [make_event(task_id=f"run-{i}", correlation_id=f"run-{i}/0", kind="task_finished",
                              ts=answered - timedelta(minutes=40 - i), outcome="failed") for i in range(2)])
    (fired,) = alerting.evaluate_alerts(store, now=answered)
    assert fired.status == "firing" and fired.value == pytest.approx(0.9)
