"""The advice book read from a real store agrees with what the simulated fleet really did."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from retrylens.analytics.advice import advise, build_advice_book
from retrylens.analytics.advice_evidence import OUTPUT_FAILURES
from retrylens.analytics.fingerprints import FingerprintStats
from retrylens.simulation import load_scenario, run_fleet
from retrylens.store import EventStore
from retrylens.store.event_table import event_row


def _recorded_fleet(store: EventStore, tasks: int = 400) -> object:
    events: list = []
    fleet = run_fleet(
        load_scenario(None),
        tasks=tasks,
        seed=7,
        emit=events.append,
        start=datetime(2026, 11, 1, tzinfo=UTC),
    )
    store.insert_rows(
        [event_row(e, topic="t", partition=0, offset=i) for i, e in enumerate(events)]
    )
    return fleet


def _truth_of_classes(fleet: object, agent: str) -> tuple[dict[str, list[int]], dict[str, float]]:
    """Per failure class: tasks retried after one (a later attempt ran), how many then succeeded,
    and what the attempts after the first such failure spent (what no retry of it would save)."""
    out: dict[str, list[int]] = {}
    spent: dict[str, float] = {}
    for tally in fleet.tallies:  # type: ignore[attr-defined]
        if tally.agent != agent:
            continue
        for cls in {a.error_type for a in tally.log if a.failed}:
            first = min(a.number for a in tally.log if a.error_type == cls)
            if tally.log[-1].number > first:
                entry = out.setdefault(cls, [0, 0])
                entry[0] += 1
                entry[1] += tally.outcome.value == "succeeded"
                spent[cls] = spent.get(cls, 0.0) + sum(
                    a.cost_usd for a in tally.log if a.number > first
                )
    return out, spent


#: decisions after which no retry follows (the book's retries query leaves them out)
_NOT_A_RETRY = ("give_up", "handoff_human", "cancel_chain", "none", "")


def _truth_of_retries_after_output_failures(fleet: object) -> dict[str, dict[str, object]]:
    """Per ``project/agent`` and per kind of retry after an output failure (simplified, i.e. decided
    ``degrade_precision``, or any other): the retries that ran, how many of them succeeded, and
    what the attempts from each retry to the task's end spent (sum, sum of squares)."""
    out: dict[str, dict[str, object]] = {}
    for tally in fleet.tallies:  # type: ignore[attr-defined]
        numbers = {a.number: a for a in tally.log}
        for failed in tally.log:
            after = numbers.get(failed.number + 1)
            if (not failed.failed or failed.error_type not in OUTPUT_FAILURES
                    or failed.decision in _NOT_A_RETRY or after is None):
                continue
            agent = out.setdefault(f"{tally.project}/{tally.agent}", {"relaxed_n": 0, "relaxed_ok": 0, "other_n": 0, "other_ok": 0,
                                                 "relaxed_spent": [0.0, 0.0], "other_spent": [0.0, 0.0]})
            prefix = "relaxed" if failed.decision == "degrade_precision" else "other"
            spent = sum(a.cost_usd for a in tally.log if a.number > failed.number)
            agent[f"{prefix}_n"] += 1  # type: ignore[operator]
            agent[f"{prefix}_ok"] += not after.failed  # type: ignore[operator]
            total = agent[f"{prefix}_spent"]
            agent[f"{prefix}_spent"] = [total[0] + spent, total[1] + spent**2]  # type: ignore[index]
    return out


def test_the_books_retries_after_an_output_failure_simplified_or_not_are_the_fleets_truth(store: EventStore) -> None:
    """What the degrade advice weighs: after an output failure, how often a simplified retry and
    any other retry succeeded, and what each spent to the task's end, per agent."""
    fleet = _recorded_fleet(store)
    agents = build_advice_book(store)["agents"]
    truth = _truth_of_retries_after_output_failures(fleet)
    fields = ("relaxed_n", "relaxed_ok", "other_n", "other_ok")
    assert {k: {f: v[f] for f in fields} for k, v in agents.items() if v["relaxed_n"] or v["other_n"]} \
        == {agent: {f: t[f] for f in fields} for agent, t in truth.items()}
    for agent, t in truth.items():
        book = agents[agent]
        for kind in ("relaxed", "other"):
            expected = t[f"{kind}_spent"] if t[f"{kind}_n"] else None
            assert (book[f"{kind}_spent"] is None) is (expected is None), (agent, kind)
            if expected is not None:
                assert book[f"{kind}_spent"] == pytest.approx(expected, rel=1e-9, abs=1e-12), (agent, kind)
    # the fleet has both kinds, each with successes and failures, for more than one agent
    assert len(truth) > 1 and all(sum(t[f] for t in truth.values()) > 10 for f in fields)  # type: ignore[misc]
    assert 0 < sum(t["relaxed_ok"] for t in truth.values()) < sum(t["relaxed_n"] for t in truth.values())  # type: ignore[misc]
    assert 0 < sum(t["other_ok"] for t in truth.values()) < sum(t["other_n"] for t in truth.values())  # type: ignore[misc]


def test_the_books_per_class_recovery_and_spend_are_the_fleets_truth_and_drive_the_cap_advice(
    store: EventStore,
) -> None:
    fleet = _recorded_fleet(store)
    book = build_advice_book(store)
    support = book["agents"]["shop/support-agent"]
    classes, spent = _truth_of_classes(fleet, "support-agent")
    assert support["classes"] == classes
    # sums of the same floats in another order differ in the last bits: compare within 1e-9
    assert {c: v[0] for c, v in support["classes_spent"].items()} == pytest.approx(
        spent, abs=1e-9
    )
    retried, recovered = support["classes"][
        "logic"
    ]  # orders that do not exist: no retry ever finds them
    assert retried >= 8 and recovered == 0
    # ... but a retry after one re-runs only the lookup tool, which costs nothing: no saving
    assert support["classes_spent"]["logic"] == [0.0, 0.0] and spent["validation"] > 0
    advice = advise(
        0.05,
        FingerprintStats(project="shop", fingerprint="f" * 32),
        project="shop",
        agent="support-agent",
        book=book,
        human_review_threshold=0.7,
    )
    assert "no_retry_of" not in advice.kinds and advice.recommendation.caps == {}
    # the tasks whose first attempt failed on the output, per agent: what simplified mode first acts on
    first_failed: dict[str, int] = {}
    for tally in fleet.tallies:  # type: ignore[attr-defined]
        first = tally.log[0] if tally.log else None
        hit = first is not None and first.error_type in ("schema_mismatch", "validation")
        first_failed[tally.agent] = first_failed.get(tally.agent, 0) + hit
    assert {k.split("/")[1]: v["first_failed"] for k, v in book["agents"].items()} == first_failed
    assert book["version"] == 5 and sum(first_failed.values()) > 50


def test_the_books_recovery_after_k_failures_is_the_fleets_truth(store: EventStore) -> None:
    """Per k (1 to 6): the tasks that failed at least k times, and how many of them succeeded."""
    fleet = _recorded_fleet(store)
    support = build_advice_book(store)["agents"]["shop/support-agent"]
    truth: dict[str, list[int]] = {}
    for tally in fleet.tallies:  # type: ignore[attr-defined]
        if tally.agent != "support-agent":
            continue
        fails = len({a.number for a in tally.log if a.failed})
        for k in range(1, min(fails, 6) + 1):
            entry = truth.setdefault(str(k), [0, 0])
            entry[0] += 1
            entry[1] += tally.outcome.value == "succeeded"
    assert truth and support["recovery"] == truth


def test_a_project_key_sees_only_its_projects_entries_and_no_pooled_effects() -> None:
    from retrylens.analytics.advice_book import book_for_projects

    book = {"agents": {"shop/a": 1, "other/b": 2}, "refs": {"shop/r": 3, "other/r": 4},
            "segments": {"shop/a": 5, "other/b": 6}, "effects": {"retry": 0.1}, "retired": ["x"]}
    assert book_for_projects(book, frozenset({"shop"})) == {
        "agents": {"shop/a": 1}, "refs": {"shop/r": 3}, "segments": {"shop/a": 5}, "retired": ["x"]}
    assert book_for_projects(book, None) is book
    assert book_for_projects({}, frozenset({"shop"})) == {"agents": {}, "refs": {}, "segments": {}}
