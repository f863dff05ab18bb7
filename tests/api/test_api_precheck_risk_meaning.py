"""``risk`` means one thing on every path: the probability that the task fails.

Planted: an agent whose tasks retry a lot — 10 tasks of 3 attempts each, 2 of them failed
for good — so 22 of its 30 attempts failed (0.733) but 2 of its 10 tasks (0.2). With no
model, for a new input and for an empty one, the risk is the agent's task failure rate;
for an input seen before, that input's task record smoothed towards it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from apitest_support import ACME, NOW, insert

from retrylens.schemas import RetryEvent
from retrylens.sdk.text.features import input_fingerprint

pytestmark = pytest.mark.clickhouse
AGENT = "retrier"
SEEN = "Reconcile the quarterly supplier ledger"


def _task(number: int, *, fails: bool) -> list[RetryEvent]:
    task = f"retrier-{number}"
    common = {"project": "acme", "agent": {"name": AGENT}, "task_id": task,
              "input_fingerprint": input_fingerprint(SEEN if number < 4 else f"input {number}")}
    start = NOW - timedelta(minutes=30 + number)
    events = [RetryEvent(correlation_id=f"{task}-0", attempt=0, kind="task_started", ts=start, **common)]
    for attempt in (1, 2, 3):
        ok = attempt == 3 and not fails
        at = start + timedelta(seconds=attempt)
        events.append(RetryEvent(correlation_id=f"{task}-{attempt}", attempt=attempt, kind="attempt_started", ts=at,
                                 **common))
        events.append(RetryEvent(correlation_id=f"{task}-{attempt}", attempt=attempt, ts=at,
                                 **({"kind": "attempt_succeeded"} if ok else
                                    {"kind": "attempt_failed", "error_type": "rate_limit"}), **common))
    events.append(RetryEvent(correlation_id=f"{task}-3", attempt=3, kind="task_finished", ts=start + timedelta(seconds=4),
                             outcome="failed" if fails else "succeeded", **common))
    return events


def _ask(client, task_input: str) -> dict:
    body = {"project": "acme", "agent": AGENT, "task_input": task_input}
    response = client.post("/v1/precheck", json=body, headers=ACME)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def planted(seeded):
    insert(seeded, [e for n in range(10) for e in _task(n, fails=n in (0, 1))])
    return seeded


def test_with_no_model_a_new_input_gets_the_agents_task_failure_rate_not_its_attempt_failure_share(client, planted):
    answer = _ask(client, "Summarise the weekly meeting")
    assert answer["model_version"] == "none"
    assert answer["risk"] == pytest.approx(0.2)


def test_an_empty_input_gets_the_agents_task_failure_rate(client, planted):
    assert _ask(client, "")["risk"] == pytest.approx(0.2)


def test_an_input_seen_before_gets_its_task_record_smoothed_towards_the_agents(client, app, planted):
    app.state.scorer.fingerprints.refresh_s = 0
    # 4 earlier tasks of this input, 2 failed; 2 pseudo-tasks at the agent's 0.2
    assert _ask(client, SEEN)["risk"] == pytest.approx((2 + 2 * 0.2) / (4 + 2))


def test_the_openapi_schema_says_what_risk_means(client):
    risk = client.get("/openapi.json").json()["components"]["schemas"]["PrecheckResponse"]["properties"]["risk"]
    assert "probability that the task fails" in risk["description"]
