"""What keeps a pre-check on the event loop in the steady state, and what that must not change.

A pre-check that waits for a worker thread or a store read pays milliseconds under load
(issue 22 keeps its p99 within 1.5 × healthz's). These tests pin the steady state as
"answered from memory on the event loop", and that an answer from memory is the answer the
straightforward reads of the store would give.
"""

from __future__ import annotations

import inspect
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from apitest_support import ACME
from fastapi.routing import APIRoute

from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import metrics_summary
from retrylens.analytics.model_store import ModelStore, models_dir
from retrylens.analytics.training import train_from_store
from retrylens.api import precheck
from retrylens.api.base_rates import BaseRates
from retrylens.api.precheck import BASE_RATE_DAYS, NeedsIO, RiskScorer
from retrylens.sdk.core.preflight import PrecheckRequest

pytestmark = pytest.mark.clickhouse
TEXT = "Summarise the weekly meeting notes and the invoice refund ledger"


def _request(agent: str = "planner", task_input: str = TEXT) -> PrecheckRequest:
    return PrecheckRequest(project="acme", agent=agent, task_input=task_input)


def _dependencies(dependant) -> list:
    found = []
    for sub in dependant.dependencies:
        found.append(sub.call)
        found += _dependencies(sub)
    return found


def _route(app, path: str):
    routes = [*app.routes, *precheck.router.routes]
    return next(r for r in routes if isinstance(r, APIRoute) and r.path == path)


def test_the_key_check_of_a_precheck_runs_on_the_event_loop_not_a_worker_thread(client, app):
    """A sync dependency is sent to a worker thread on every request: a hand-off each way."""
    ring = app.state.keyring
    resolve, scored_on, checked_on = ring.resolve, [], []
    score = app.state.scorer.score

    def recording_resolve(presented: str):
        checked_on.append(threading.get_ident())
        return resolve(presented)

    def recording_score(request, *, io: bool = True):
        scored_on.append((threading.get_ident(), io))
        return score(request, io=io)

    ring.resolve, app.state.scorer.score = recording_resolve, recording_score
    for _ in range(2):
        response = client.post("/v1/precheck", headers=ACME,
                               json={"project": "acme", "agent": "planner", "task_input": TEXT})
        assert response.status_code == 200, response.text
    loop_thread = next(ident for ident, io in scored_on if not io)  # score(io=False) runs on the loop
    assert checked_on and set(checked_on) == {loop_thread}


@pytest.mark.parametrize("path", ["/v1/precheck", "/healthz"])
def test_every_dependency_of_the_precheck_and_healthz_routes_is_async(app, path):
    calls = _dependencies(_route(app, path).dependant) + [d.dependency for d in app.router.dependencies]
    assert calls, "the route has dependencies (auth, the JSON body check)"
    sync = [getattr(c, "__name__", repr(c)) for c in calls
            if not (inspect.iscoroutinefunction(c) or inspect.iscoroutinefunction(type(c).__call__))]
    assert sync == []


def test_the_model_recheck_answers_from_memory_while_current_names_the_same_version(api_settings, seeded):
    models = ModelStore(models_dir(api_settings))
    train_from_store(seeded, model_store=models)
    scorer = RiskScorer(api_settings, seeded, model_check_s=0.0)
    first, _ = scorer.score(_request())  # loads the model and the project's history
    again, _ = scorer.score(_request(), io=False)  # re-check due: the pointer still names v0001
    assert first.model_version == again.model_version == "v0001"


def test_a_new_model_version_still_takes_the_worker_thread_and_is_used(api_settings, seeded):
    models = ModelStore(models_dir(api_settings))
    train_from_store(seeded, model_store=models)
    scorer = RiskScorer(api_settings, seeded, model_check_s=0.0)
    assert scorer.score(_request())[0].model_version == "v0001"
    train_from_store(seeded, model_store=models)
    with pytest.raises(NeedsIO):
        scorer.score(_request(), io=False)
    assert scorer.score(_request())[0].model_version == "v0002"


def test_without_any_model_the_recheck_answers_from_memory(api_settings, seeded):
    scorer = RiskScorer(api_settings, seeded, model_check_s=0.0)
    assert scorer.score(_request())[0].model_version == "none"
    assert scorer.score(_request(), io=False)[0].model_version == "none"


def test_after_a_projects_first_precheck_its_other_agents_answer_from_memory(api_settings, seeded):
    scorer = RiskScorer(api_settings, seeded)
    scorer.score(_request("planner"))
    for agent in ("coder", "researcher", "ghost-agent"):
        response, _ = scorer.score(_request(agent), io=False)
        assert response.model_version == "none"


def _task_failure_rate(summary) -> float | None:
    """Tasks that ended failed / tasks that ended: the one meaning of a pre-check's risk."""
    failed = summary.failed_with_retry + summary.failed_without_retry
    return failed / summary.tasks if summary.tasks else None


def test_each_agents_rate_read_at_once_equals_its_own_summary(seeded):
    """The one grouped read gives each agent exactly what reading it alone gives: its task
    failure rate (never the share of failed attempts, which retries inflate)."""
    now = datetime.now(UTC)
    rates = BaseRates(seeded, days=BASE_RATE_DAYS, clock=lambda: now).read("acme")
    where = Slice(project="acme", start=now - timedelta(days=BASE_RATE_DAYS))
    assert set(rates.by_agent) == {"planner", "coder", "researcher"}
    for agent in ("planner", "coder", "researcher", "ghost-agent"):
        alone = metrics_summary(seeded, Slice(project="acme", agent=agent, start=where.start))
        assert rates.rate(agent) == _task_failure_rate(alone)
    whole = metrics_summary(seeded, where)
    assert rates.rate(None) == _task_failure_rate(whole)
    assert _task_failure_rate(whole) != whole.failures / whole.calls  # the two meanings differ here
    assert BaseRates(seeded).read("nope").rate(None) is None


def test_old_rates_keep_answering_while_they_are_reread_in_the_background(seeded):
    rates = BaseRates(seeded, ttl_s=0.0)
    assert rates.table("acme", io=False) is None  # never read: the caller must go to the store
    first = rates.table("acme")
    assert first is not None
    served = rates.table("acme", io=False)  # stale at once (ttl 0): served, re-read behind it
    assert served is first
    deadline = time.monotonic() + 10
    while rates.table("acme", io=False) is first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert rates.table("acme", io=False) is not first
    assert rates.table("acme", io=False).by_agent == first.by_agent


def test_the_answer_from_memory_is_the_answer_read_straight_from_the_store(api_settings, seeded):
    """Byte for byte but the pre-check id: the in-memory path (indexes, cached rates, the model
    re-check on the loop) against a scorer that reads history and similar failures from the store."""
    train_from_store(seeded, model_store=ModelStore(models_dir(api_settings)))
    fast = RiskScorer(api_settings, seeded, model_check_s=0.0)
    straight = RiskScorer(api_settings, seeded, history_refresh_s=0.0, base_rate_ttl_s=0.0)
    inputs = [_request(agent, text) for agent in ("planner", "coder", "ghost-agent")
              for text in (TEXT, "", "Plan the quarterly compliance audit of every vendor")]
    fast.score(inputs[0])  # the project's first pre-check loads it
    for request in inputs:
        memory, _ = fast.score(request, io=False)
        store, _ = straight.score(request)
        assert memory.model_dump_json(exclude={"precheck_id"}) == store.model_dump_json(exclude={"precheck_id"})



def test_the_answer_is_serialised_once_into_the_bytes_its_response_model_gives(client, api_settings, seeded, monkeypatch):
    """FastAPI validates a returned model against ``response_model`` and serialises it again (~25 µs
    of a pre-check); the route returns the answer's JSON itself: the same bytes, read by the same
    model, still declared in the OpenAPI schema."""
    import fastapi.routing
    from pydantic import TypeAdapter

    from retrylens.sdk.core.preflight import PrecheckResponse

    train_from_store(seeded, model_store=ModelStore(models_dir(api_settings)))
    serialised, original = [], fastapi.routing.serialize_response

    async def counting(**kwargs):
        serialised.append(kwargs.get("field"))
        return await original(**kwargs)

    monkeypatch.setattr(fastapi.routing, "serialize_response", counting)
    response = client.post("/v1/precheck", headers=ACME, json={"project": "acme", "agent": "planner", "task_input": TEXT})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    answer = PrecheckResponse.model_validate_json(response.content)
    # a full answer (advice with its evidence); reasons may be empty since they are centred:
    # none of this input's features moves its risk by x1.16 from the agent's typical input
    assert answer.advice and answer.similar_failures is not None
    assert response.content == TypeAdapter(PrecheckResponse).dump_json(answer, by_alias=True)
    assert serialised == []
    schema = client.get("/openapi.json").json()["paths"]["/v1/precheck"]["post"]["responses"]["200"]
    assert schema["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/PrecheckResponse"}


def test_a_remembered_inputs_similar_failures_need_not_work_out_its_words_again(api_settings, seeded, monkeypatch):
    """The nearest failures of an input are remembered per input and agent; its content words
    only build a new answer, so a repeated input does not compute them again."""
    worked_out = []
    original = precheck.content_words

    def counting(features):
        worked_out.append(1)
        return original(features)

    monkeypatch.setattr(precheck, "content_words", counting)
    scorer = RiskScorer(api_settings, seeded)
    first, _ = scorer.score(_request())
    again, _ = scorer.score(_request(), io=False)
    assert len(worked_out) == 1
    assert again.similar_failures == first.similar_failures
