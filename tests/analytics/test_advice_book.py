"""The advice book read from a real store agrees with what the simulated fleet really did."""

from __future__ import annotations

from datetime import UTC, datetime

from retrylens.analytics.advice import advise, build_advice_book
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


def _truth_of_classes(fleet: object, agent: str) -> dict[str, list[int]]:
    """Per failure class: tasks retried after one (a later attempt ran), and how many then succeeded."""
    out: dict[str, list[int]] = {}
    for tally in fleet.tallies:  # type: ignore[attr-defined]
        if tally.agent != agent:
            continue
        for cls in {a.error_type for a in tally.log if a.failed}:
            first = min(a.number for a in tally.log if a.error_type == cls)
            if tally.log[-1].number > first:
                entry = out.setdefault(cls, [0, 0])
                entry[0] += 1
                entry[1] += tally.outcome.value == "succeeded"
    return out


def test_the_books_per_class_recovery_is_the_fleets_truth_and_drives_the_cap_advice(
    store: EventStore,
) -> None:
    fleet = _recorded_fleet(store)
    book = build_advice_book(store)
    support = book["agents"]["shop/support-agent"]
    assert support["classes"] == _truth_of_classes(fleet, "support-agent")
    retried, recovered = support["classes"][
        "logic"
    ]  # orders that do not exist: no retry ever finds them
    assert retried >= 8 and recovered == 0
    advice = advise(
        0.05,
        FingerprintStats(project="shop", fingerprint="f" * 32),
        project="shop",
        agent="support-agent",
        book=book,
        human_review_threshold=0.7,
    )
    assert "no_retry_of" in advice.kinds and advice.recommendation.caps.get("logic") == 0
