"""Pre-flight risk: answers without a model, scores with the trained one, reloads a new one live."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from apitest_support import ACME, GLOBEX, NOW, insert
from fastapi.testclient import TestClient

from retrylens.analytics.model_store import ModelStore, models_dir
from retrylens.analytics.training import train_from_store
from retrylens.schemas import RetryEvent
from retrylens.sdk.core.preflight import PrecheckRequest, PrecheckResponse, Preflight
from retrylens.sdk.text.features import extract_input_features, input_fingerprint

pytestmark = pytest.mark.clickhouse
BAD_INPUT = "Migrate the legacy invoice refund ledger via the browser"


def _ask(client, task_input: str = "Summarise the weekly meeting", **extra) -> dict:
    body = {"project": "acme", "agent": "planner", "task_input": task_input, **extra}
    response = client.post("/v1/precheck", json=body, headers=ACME)
    assert response.status_code == 200, response.text
    PrecheckResponse.model_validate(response.json())
    return response.json()


def _fail_three_times(store) -> None:
    """Three tasks of BAD_INPUT, each failed for good (a logic error, then the task ended failed)."""
    insert(store, [
        RetryEvent(project="acme", agent={"name": "planner"}, task_id=f"bad-{i}", correlation_id=f"bad-{i}-1",
                   attempt=1, kind=kind, ts=NOW - timedelta(minutes=i), input_fingerprint=input_fingerprint(BAD_INPUT),
                   phase="planning", **extra)
        for i in range(3)
        for kind, extra in (("attempt_failed", {"error_type": "logic"}), ("task_finished", {"outcome": "failed"}))
    ])


def test_without_a_model_the_answer_comes_from_history_with_model_version_none(client, app, seeded):
    app.state.scorer.fingerprints.refresh_s = 0  # read history straight from the store
    answer = _ask(client)
    assert answer["model_version"] == "none" and 0 <= answer["risk"] <= 1
    assert answer["top_features"] == ["agent_base_rate"]
    _fail_three_times(seeded)
    bad = _ask(client, BAD_INPUT)
    assert bad["known_bad_fingerprint"] is True and bad["top_features"] == ["fingerprint_history"]
    assert bad["risk"] > answer["risk"]
    assert bad["recommended"] == {"max_attempts": 1, "degrade_first": False, "human_review": True, "caps": {}}
    assert bad["advice"][0]["advice"] == "human_review" and "failed in all 3 earlier task(s)" in bad["advice"][0]["evidence"]
    assert answer["advice"] == [] and answer["recommended"]["human_review"] is False


def test_with_a_trained_model_it_scores_and_names_the_features_that_raised_the_risk(client, api_settings, seeded):
    version = train_from_store(seeded, model_store=ModelStore(models_dir(api_settings))).version
    answer = _ask(client, BAD_INPUT, features={"tool:browser": True, "phase": "planning"})
    assert answer["model_version"] == version == "v0001"
    assert 0 < answer["risk"] < 1 and 1 <= len(answer["top_features"]) <= 5
    # reasons an operator can act on: each feature in words, with the way and size of its effect
    reasons = answer["reasons"]
    assert 1 <= len(reasons) <= 5 and all(r["words"].endswith("failure odds for planner") for r in reasons)
    assert [abs(r["contribution"]) for r in reasons] == sorted((abs(r["contribution"]) for r in reasons), reverse=True)
    for r in reasons:
        sign = "×" if r["contribution"] >= 0 else "÷"
        assert f": {sign}" in r["words"] and r["odds_factor"] == pytest.approx(math.exp(r["contribution"]), rel=1e-3)
    assert {r["feature"] for r in reasons if r["contribution"] > 0} == set(answer["top_features"])
    recent = client.get("/v1/projects/acme/prechecks", headers=ACME).json()[0]
    assert recent["model_version"] == "v0001" and recent["input_fingerprint"] == input_fingerprint(BAD_INPUT)
    assert recent["precheck_id"] == answer["precheck_id"]
    assert recent["explanation"]["top_features"] == answer["reasons"]
    assert client.get("/v1/model", headers=ACME).json()["meta"]["metrics"]["roc_auc"] is not None


def test_the_fast_linear_path_equals_the_models_own_prediction(api_settings, seeded):
    from retrylens.analytics.classifier import RiskContext, feature_dict
    from retrylens.api.fast_model import LinearRiskScorer
    from retrylens.sdk.text.features import extract_input_features

    model = train_from_store(seeded).model
    fast = LinearRiskScorer(model)
    assert fast.folds is not None
    for text in (BAD_INPUT, "Summarise the weekly meeting", "x" * 5000):
        fdict = feature_dict(extract_input_features(text, agent="coder"), RiskContext(phase="execution", hour=3,
                                                                                      fingerprint_tasks=4,
                                                                                      fingerprint_failed_tasks=3))
        assert fast.risk(fdict) == pytest.approx(float(model.predict_proba([fdict])[0]), abs=1e-12)



def test_the_fast_linear_path_reads_a_prepared_row_exactly_as_the_raw_row(api_settings, seeded):
    """The pre-check hands over the row ``model_input`` already prepared; not preparing it again
    must not move the risk by a single bit (the answer's bytes carry it in full)."""
    from retrylens.analytics.classifier import RiskContext, feature_dict
    from retrylens.api.fast_model import LinearRiskScorer
    from retrylens.sdk.text.features import extract_input_features

    model = train_from_store(seeded).model
    fast = LinearRiskScorer(model)
    context = RiskContext(phase="execution", fingerprint_tasks=4, fingerprint_failed_tasks=3)
    for text in (BAD_INPUT, "Summarise the weekly meeting", "", "x" * 5000):
        features = extract_input_features(text, agent="coder")
        raw = feature_dict(features, context, text=text if model.text_features else None)
        assert fast.risk(model.model_input(features, context, text=text), prepared=True) == fast.risk(raw)

def test_fingerprint_history_is_served_from_memory_and_refreshed_in_the_background(app, seeded):
    index = app.state.scorer.fingerprints
    index.refresh_s = 0.2
    fp = input_fingerprint(BAD_INPUT)
    assert index.lookup("acme", fp).failures == 0
    _fail_three_times(seeded)
    assert index.lookup("acme", fp).failures == 0  # not yet: the index is a snapshot
    import time

    deadline = time.monotonic() + 10
    while index.lookup("acme", fp).failures < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert index.lookup("acme", fp).failures == 3


def test_a_newly_trained_model_is_used_without_a_restart(client, app, api_settings, seeded):
    app.state.scorer.model_check_s = 0.0
    models = ModelStore(models_dir(api_settings))
    train_from_store(seeded, model_store=models)
    assert _ask(client)["model_version"] == "v0001"
    train_from_store(seeded, model_store=models)
    assert _ask(client)["model_version"] == "v0002"


def test_non_finite_or_odd_features_do_not_break_scoring(client):
    answer = _ask(client, features={"n_chars": 1e308, "kw:x": True, "model": "gpt", "phase": ""})
    assert 0 <= answer["risk"] <= 1
    body = b'{"project": "acme", "agent": "a", "task_input": "x", "features": {"n_chars": Infinity}}'
    response = client.post("/v1/precheck", content=body, headers={**ACME, "content-type": "application/json"})
    assert response.status_code in (200, 422)


def test_the_sdk_preflight_client_reads_the_answer(app):
    with TestClient(app, headers=ACME) as http:
        advice = Preflight("http://testserver", client=http).check(
            PrecheckRequest(project="acme", agent="coder", task_input="Export the monthly report"))
    assert advice is not None and advice.model_version == "none"


def test_the_model_route_names_the_weights_of_the_callers_recent_inputs(client, api_settings, seeded):
    """What the dashboard's model page shows through the API (before, the route sent no
    weights and the page said none were stored). A key sees its own projects' features only."""
    insert(seeded, [
        RetryEvent(project="globex", agent={"name": "planner"}, task_id=f"g-{i}", correlation_id=f"g-{i}-1",
                   attempt=1, kind="task_started", ts=NOW, input_features={"n_chars": 40, "kw:globexonly": True})
        for i in range(3)
    ])
    from retrylens.analytics.model_weights import feature_weights, recent_input_features

    assert client.get("/v1/model", headers=ACME).json()["feature_weights"] == []  # no model yet
    model = train_from_store(seeded, model_store=ModelStore(models_dir(api_settings))).model
    acme_inputs = recent_input_features(seeded, projects=frozenset({"acme"}))
    globex_inputs = recent_input_features(seeded, projects=frozenset({"globex"}))
    assert acme_inputs and not any("kw:globexonly" in features for features in acme_inputs)
    assert any("kw:globexonly" in features for features in globex_inputs)
    acme = [tuple(pair) for pair in client.get("/v1/model", headers=ACME).json()["feature_weights"]]
    globex = [tuple(pair) for pair in client.get("/v1/model", headers=GLOBEX).json()["feature_weights"]]
    assert acme == feature_weights(model, acme_inputs) and globex == feature_weights(model, globex_inputs)
    assert acme != globex and any(name.startswith("agent=") for name, _ in acme)


def test_an_empty_input_or_unknown_agent_answers_clearly_and_says_no_model_is_trained(client):
    for body in ({"project": "acme", "agent": "nobody-knows-me", "task_input": ""},
                 {"project": "acme", "agent": "a-new-agent", "task_input": "   "}):
        response = client.post("/v1/precheck", json=body, headers=ACME)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["model_version"] == "none" and answer["model_status"].startswith("none: ")
        assert answer["recommended"] == {"max_attempts": None, "degrade_first": False, "human_review": False, "caps": {}}


def test_an_unknown_project_is_a_clear_404_not_a_500(client):
    response = client.post("/v1/precheck", json={"project": "nope", "agent": "a", "task_input": "x"}, headers=ACME)
    assert response.status_code == 404 and "nope" in response.text


def test_a_missing_input_is_a_422_naming_the_field(client):
    response = client.post("/v1/precheck", json={"project": "acme", "agent": "a"}, headers=ACME)
    assert response.status_code == 422 and "task_input" in response.json()["message"]


def test_a_stale_or_foreign_model_says_so_in_the_answer(client, api_settings, seeded):
    from datetime import UTC, datetime

    from retrylens.api.precheck import model_status

    train_from_store(seeded, model_store=ModelStore(models_dir(api_settings)))
    assert _ask(client)["model_status"] == "current"
    from retrylens.analytics.classifier import FEATURE_SET_VERSION

    old = {"trained_at": (datetime.now(UTC) - timedelta(days=45)).isoformat(), "feature_set": FEATURE_SET_VERSION}
    assert model_status(old).startswith("stale: trained 45 days ago")
    assert model_status({"feature_set": "v1"}).startswith("stale: trained on feature set v1")


def test_with_a_model_in_force_an_empty_input_is_not_scored_as_safe(client, api_settings, seeded):
    """The model scores an empty text by its size features (0 lines, far fewer than usual):
    a near-zero risk that means "nothing to read", not "safe". The answer says so and
    gives the agent's own failure rate instead, as when there is no model."""
    train_from_store(seeded, model_store=ModelStore(models_dir(api_settings)))
    scored = _ask(client)
    assert scored["model_version"] == "v0001" and scored["model_status"] == "current"
    for blank in ("", "  \n\t "):
        answer = _ask(client, blank)
        assert answer["model_version"] == "none", answer
        assert answer["model_status"].startswith("none: the input is empty"), answer["model_status"]
        assert answer["top_features"] == ["agent_base_rate"]
        assert answer["risk"] == pytest.approx(client.app.state.scorer.base_rate("acme", "planner"))
        assert [r["words"] for r in answer["reasons"]][0].startswith("empty input: planner's task failure rate")


def test_with_a_model_in_force_an_unknown_agent_or_project_is_named_in_the_answer(client, api_settings, seeded):
    from retrylens.api.auth import local_token

    train_from_store(seeded, model_store=ModelStore(models_dir(api_settings)))
    ghost = _ask(client, agent="ghost-agent")
    assert ghost["model_version"] == "v0001" and 0 <= ghost["risk"] <= 1
    assert ghost["model_status"].startswith("current; ") and "'ghost-agent' has no recorded attempts in project 'acme'" \
        in ghost["model_status"], ghost["model_status"]
    everyone = {"X-API-Key": local_token(api_settings)}  # reads every project, so an unknown one is scored
    body = {"project": "nope", "agent": "planner", "task_input": "Summarise the weekly meeting"}
    nope = client.post("/v1/precheck", json=body, headers=everyone).json()
    assert nope["model_status"].startswith("current; ") and "project 'nope' has no recorded attempts" \
        in nope["model_status"], nope["model_status"]
    assert _ask(client)["model_status"] == "current"  # a known agent of a known project: nothing to add


@pytest.mark.parametrize("field", ["project", "agent"])
def test_an_empty_project_or_agent_is_a_422_naming_the_field(client, field):
    body = {"project": "acme", "agent": "planner", "task_input": "x", field: "  "}
    response = client.post("/v1/precheck", json=body, headers=ACME)
    assert response.status_code == 422 and f"body.{field}" in response.json()["message"], response.text
    assert client.get("/v1/projects/acme/prechecks", headers=ACME).json() == []  # nothing stored


def _deleted_sku_tasks(store, n: int = 8) -> None:
    """``n`` planner tasks naming SKU-4411, each worded differently, each failed for good (no such SKU)."""
    events = []
    for i in range(n):
        text = f"Plan restock number {i + 1} of SKU-4411 for the warehouse"
        events += [
            RetryEvent(project="acme", agent={"name": "planner"}, task_id=f"sku-{i}", correlation_id=f"sku-{i}-{k}",
                       attempt=attempt, kind=kind, ts=NOW - timedelta(minutes=30 - i, seconds=-k),
                       input_fingerprint=input_fingerprint(text), phase="planning", **extra)
            for k, (attempt, kind, extra) in enumerate((
                (0, "task_started", {"input_features": extract_input_features(text, agent="planner")}),
                (1, "attempt_failed", {"error_type": "logic", "cost_usd": 0.003}),
                (1, "task_finished", {"outcome": "failed"}),
            ))
        ]
    insert(store, events)


def test_an_input_naming_a_reference_that_failed_every_task_goes_to_a_person_first(client, api_settings, seeded):
    _deleted_sku_tasks(seeded)
    train_from_store(seeded, model_store=ModelStore(models_dir(api_settings)))
    answer = _ask(client, "Is SKU-4411 back in stock? Plan an order for the Leeds shop")
    assert answer["recommended"]["human_review"] is True and answer["known_bad_fingerprint"] is False
    (entry,) = answer["advice"]
    assert entry["advice"] == "human_review" and "names 'sku-4411', seen in 8 earlier planner tasks" in entry["evidence"]
    assert _ask(client, "Plan an order of SKU-1200 for the Leeds shop")["recommended"]["human_review"] is False
