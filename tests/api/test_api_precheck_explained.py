"""A pre-check answer explains itself: reasons in words for the agent, the nearest past failures
of similar inputs with links and failure groups, and the evidence of each advice."""

from __future__ import annotations

from datetime import timedelta

import pytest
from apitest_support import ACME, GLOBEX, NOW, insert

from retrylens.analytics import explain
from retrylens.analytics.model_store import ModelStore, models_dir
from retrylens.analytics.training import train_from_store
from retrylens.schemas import RetryEvent
from retrylens.sdk.text.features import extract_input_features, input_fingerprint

pytestmark = pytest.mark.clickhouse
LEDGER = "Migrate the legacy invoice refund ledger into the warehouse via the browser"
ALIKE = "Reconcile the legacy invoice refund ledger before the audit"


def _ask(client, task_input: str, *, headers=ACME, project: str = "acme", agent: str = "planner") -> dict:
    body = {"project": project, "agent": agent, "task_input": task_input}
    response = client.post("/v1/precheck", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def _failed_ledger_tasks(store, n: int = 3, project: str = "acme", minutes_ago: int = 10) -> None:
    """``n`` tasks of LEDGER that failed for good, each with its input's features."""
    features = extract_input_features(LEDGER, agent="planner")
    insert(store, [
        RetryEvent(project=project, agent={"name": "planner"}, task_id=f"ledger-{i}", correlation_id=f"ledger-{i}-1",
                   attempt=1, kind=kind, ts=NOW - timedelta(minutes=minutes_ago + i), input_fingerprint=input_fingerprint(LEDGER),
                   input_features=features if kind == "task_started" else {}, phase="execution", **extra)
        for i in range(n)
        for kind, extra in (("task_started", {}), ("attempt_failed", {"error_type": "logic",
                                                                       "error_detail": {"message": "ledger row 17 is locked"}}),
                            ("task_finished", {"outcome": "failed"}))
    ])


def test_a_similar_input_lists_the_nearest_past_failures_with_links_groups_and_known_bad(client, app, seeded):
    app.state.scorer.fingerprints.refresh_s = 0  # read straight from the store
    _failed_ledger_tasks(seeded)
    answer = _ask(client, ALIKE)
    nearest = answer["similar_failures"]
    assert nearest, answer
    first = nearest[0]
    assert first["task_id"].startswith("ledger-") and first["agent"] == "planner"
    assert first["input_fingerprint"] == input_fingerprint(LEDGER)
    assert {"legacy", "invoice", "refund", "ledger"} <= set(first["shared_words"])
    assert first["error_type"] == "logic" and len(first["failure_group"]) == 16
    assert first["known_bad"] is True and first["input_failed_tasks"] == 3
    assert first["link"] == f"task?project=acme&task_id={first['task_id']}"
    assert first["group_link"] == f"groups?project=acme&group={first['failure_group']}"
    assert "'ledger'" in first["words"] and "known bad" in first["words"]
    # one entry per input, not the same input three times
    assert [n["input_fingerprint"] for n in nearest].count(input_fingerprint(LEDGER)) == 1
    # and the pre-check log keeps them with the answer
    recent = client.get("/v1/projects/acme/prechecks", headers=ACME).json()[0]
    assert recent["explanation"]["similar_failures"] == nearest


def test_an_input_sharing_no_words_has_no_similar_failures_and_projects_stay_apart(client, app, seeded):
    app.state.scorer.fingerprints.refresh_s = 0
    _failed_ledger_tasks(seeded)
    assert _ask(client, "Water the cactus gently")["similar_failures"] == []
    assert all(not n["task_id"].startswith("ledger-")
               for n in _ask(client, ALIKE, headers=GLOBEX, project="globex")["similar_failures"])


def test_the_in_memory_index_answers_from_memory_after_the_first_load(client, app, seeded):
    _failed_ledger_tasks(seeded)
    scorer = app.state.scorer
    _ask(client, ALIKE)  # loads the project's index
    from retrylens.sdk.core.preflight import PrecheckRequest

    response, _ = scorer.score(PrecheckRequest(project="acme", agent="planner", task_input=ALIKE), io=False)
    assert response.similar_failures and response.similar_failures[0]["task_id"].startswith("ledger-")


def test_reasons_name_the_agent_and_the_inputs_own_numbers(client, api_settings, seeded):
    _failed_ledger_tasks(seeded, n=8, minutes_ago=100)  # among the training tasks: something to explain
    train_from_store(seeded, model_store=ModelStore(models_dir(api_settings)))
    answer = _ask(client, LEDGER)
    assert answer["reasons"]
    for reason in answer["reasons"]:
        assert reason["words"].endswith("failure odds for planner"), reason
        assert reason["direction"] == ("raises" if reason["contribution"] > 0 else "lowers")
    raw = {"n_numbers": 200, "n_chars": 5400}
    words = explain.contribution("size_z:n_numbers|agent=triage-agent", 2.1, 1.13, agent="triage-agent", raw=raw)
    assert words["words"] == "200 numbers in the input, much more than triage-agent's usual: ×3.1 failure odds for triage-agent"
    fewer = explain.contribution("n_chars", 0.86, -0.7, agent="triage-agent", raw=raw)["words"]
    assert fewer == "5,400 characters in the input: ÷2 failure odds for triage-agent"


def test_each_advice_carries_its_evidence_in_the_answer(client, app, seeded):
    app.state.scorer.fingerprints.refresh_s = 0
    _failed_ledger_tasks(seeded)
    answer = _ask(client, LEDGER)
    assert answer["advice"], answer
    for advice in answer["advice"]:
        assert advice["advice"] and advice["action"] and advice["evidence"]


@pytest.mark.parametrize(("body", "field"), [
    ({"project": "acme", "agent": "planner"}, "task_input"),
    ({"project": "acme", "agent": "planner", "task_input": 42}, "task_input"),
    ({"project": "acme", "agent": "planner", "task_input": "x", "features": ["not", "a", "map"]}, "features"),
    ({"project": "acme", "agent": ["planner"], "task_input": "x"}, "agent"),
])
def test_a_bad_precheck_body_is_a_clear_422_naming_the_field(client, body, field):
    response = client.post("/v1/precheck", json=body, headers=ACME)
    assert response.status_code == 422, response.text
    assert field in {str(part) for error in response.json()["detail"] for part in error["loc"]}, response.json()


def test_a_count_of_one_reads_in_the_singular() -> None:
    one = {"n_lines": 1, "n_words": 1, "n_chars": 1, "n_numbers": 1, "n_entities": 1}
    assert explain.describe("size_z:n_lines|agent=triage-agent", -2.0, one) == \
        "1 line in the input, much fewer than triage-agent's usual"
    assert [explain.describe(name, 0.0, one) for name in one] == [
        "1 line in the input", "1 word in the input", "1 character in the input", "1 number in the input",
        "1 name in the input"]
    assert explain.describe("n_lines", 0.0, {"n_lines": 0}) == "0 lines in the input"
    assert explain.describe("n_chars", 0.0, {"n_chars": 1200}) == "1,200 characters in the input"
