"""A deleted SKU fails every task that names it, however it is asked: the pre-check hands the next
one to a person before spending, naming the SKU and the evidence (:mod:`retrylens.analytics.known_bad_refs`)."""

from __future__ import annotations

from datetime import timedelta

from analytics_eventset import T0, _Task

from retrylens.analytics.advice import advise, build_advice_book
from retrylens.analytics.fingerprints import FingerprintStats
from retrylens.analytics.known_bad_refs import needed_tasks
from retrylens.sdk.text.refs import input_refs
from retrylens.store import EventStore
from retrylens.store.event_table import event_row

LIVE = [f"sku-{n}" for n in range(1001, 1011)]
DELETED = "SKU-4411"
ASKS = [
    "Restock {sku} in the Leeds warehouse",
    "Ship one {sku} to the customer in Porto by express",
    "Check the shelf price of {sku} against the supplier list",
    "Reserve {sku} for the store pickup on Friday",
    "Move {sku} to the clearance aisle",
]


def _task(
    number: int, text: str, *, fails: str | None, retried: bool = False, first: str | None = None
) -> list:
    task = _Task("shop", f"t{number}", "inventory-agent", "execution", "v1",
                 T0 + timedelta(minutes=number), text)
    task.start()
    cost = {"latency": 300, "cost": 0.003, "tokens": (200, 50)}
    if fails is None:
        task.attempt(1, True, **cost)
        task.finish("succeeded", 1)
    elif retried:  # failed once, the retry worked
        task.attempt(1, False, error=fails, message="refused", **cost)
        task.decide(1, "retry_same")
        task.attempt(2, True, **cost)
        task.finish("succeeded", 2)
    elif first is not None:  # a first failure the retry got past, then the one that stopped it
        task.attempt(1, False, error=first, message="refused", **cost)
        task.decide(1, "retry_same")
        task.attempt(2, False, error=fails, message=f"{fails}: no such item", **cost)
        task.decide(2, "give_up")
        task.finish("failed", 2)
    else:
        task.attempt(1, False, error=fails, message=f"{fails}: no such item", **cost)
        task.decide(1, "give_up")
        task.finish("failed", 1)
    return task.events


def _record(
    store: EventStore,
    deleted_tasks: int,
    *,
    logic_retries_recover: bool = False,
    validation_first: bool = False,
    rate_limited: int = 0,
    ended_on_validation: int = 0,
) -> None:
    events: list = []
    number = 0
    for round_ in range(3):
        for i, sku in enumerate(LIVE):
            number += 1
            fails = "timeout" if (round_, i) in {(0, 3), (1, 5), (2, 7), (2, 9)} else None
            events += _task(number, ASKS[(i + round_) % len(ASKS)].format(sku=sku), fails=fails)
    for i in range(deleted_tasks):
        number += 1
        first = "validation" if validation_first and i % 2 else None
        events += _task(number, ASKS[i % len(ASKS)].format(sku=DELETED), fails="logic", first=first)
    for _ in range(rate_limited):  # ran out of attempts on a rate limit: failed, says nothing of the SKU
        number += 1
        events += _task(number, f"Price {DELETED} for the outlet", fails="rate_limit")
    for _ in range(ended_on_validation):  # stopped on its own output before the lookup ever ran
        number += 1
        events += _task(number, f"Label {DELETED} for the outlet", fails="validation")
    for i in range(10):  # this agent's logic (validation, rate limit) failures are usually fixed by a retry
        cls = "logic" if logic_retries_recover else "validation" if validation_first else "rate_limit"
        if logic_retries_recover or validation_first or rate_limited:
            number += 1
            events += _task(number, f"Count pallet row {chr(97 + i)}", fails=cls, retried=True)
    store.insert_rows([event_row(e, topic="t", partition=0, offset=i) for i, e in enumerate(events)])


def _advise(book: dict, text: str):
    return advise(
        0.1, FingerprintStats(project="shop", fingerprint="0" * 32), project="shop",
        agent="inventory-agent", book=book, human_review_threshold=0.7, refs=input_refs(text),
    )


def test_a_deleted_sku_that_failed_every_task_sends_a_new_wording_to_a_person_first(
    store: EventStore,
) -> None:
    _record(store, deleted_tasks=4)
    book = build_advice_book(store)
    assert book["version"] == 5
    new_ask = "Customer asks: can you hold two of SKU-4411 until Monday?"
    advice = _advise(book, new_ask)
    assert advice.kinds == ["human_review"]
    assert advice.recommendation.human_review and advice.recommendation.max_attempts == 1
    words = advice.evidence[0]["evidence"]
    assert "names 'sku-4411'" in words and "4 earlier inventory-agent tasks, none succeeded" in words
    assert "ended: 4 on logic" in words and "1 of its references named in 4+ tasks" in words
    # a live SKU, however often asked about, gets nothing
    assert _advise(book, "Customer asks: can you hold two of sku-1004 until Monday?").kinds == []


def test_too_few_failures_for_the_references_tested_are_not_evidence(store: EventStore) -> None:
    # 7 of 33 tasks failed (21 %) and 11 references were named in 3 tasks: 0.21^3 > 0.05 / 11, so
    # 3 failures of one SKU could be chance; none was named in 4
    assert needed_tasks(7 / 33, {3: 11}) == (4, 0)
    assert needed_tasks(0.15, {3: 13}) == (3, 13) and needed_tasks(0.5, {9: 13}) == (9, 13)
    assert needed_tasks(1.0, {3: 5}) is None and needed_tasks(0.2, {}) is None
    _record(store, deleted_tasks=3)
    assert _advise(build_advice_book(store), f"Move {DELETED} to aisle nine").kinds == []


def test_no_hand_off_where_this_agents_retries_fix_the_failure_class(store: EventStore) -> None:
    _record(store, deleted_tasks=6, logic_retries_recover=True)
    book = build_advice_book(store)
    assert _advise(book, f"Move {DELETED} to aisle nine").kinds == []


def test_a_book_written_before_references_were_counted_gives_no_reference_advice(
    store: EventStore,
) -> None:
    _record(store, deleted_tasks=4)
    book = build_advice_book(store)
    old = {k: v for k, v in book.items() if k != "refs"} | {"version": 3}
    assert _advise(old, f"Move {DELETED} to aisle nine").kinds == []
    assert _advise(book, f"Move {DELETED} to aisle nine").kinds == ["human_review"]


def test_what_stopped_each_task_counts_not_a_failure_its_retry_got_past(store: EventStore) -> None:
    # half the deleted SKU's tasks first failed validation (which this agent's retries fix), then
    # the lookup found no such SKU: the reference is as bad as ever
    _record(store, deleted_tasks=6, validation_first=True)
    advice = _advise(build_advice_book(store), f"Move {DELETED} to aisle nine")
    assert advice.kinds == ["human_review"]
    assert "ended: 6 on logic; logic not transient" in advice.evidence[0]["evidence"]


def test_a_task_that_ran_out_on_a_transient_failure_neither_counts_nor_clears_the_reference(
    store: EventStore,
) -> None:
    _record(store, deleted_tasks=5, rate_limited=1)
    advice = _advise(build_advice_book(store), f"Move {DELETED} to aisle nine")
    assert advice.kinds == ["human_review"]
    assert "6 earlier inventory-agent tasks, none succeeded (ended: 5 on logic, 1 on rate_limit" in (
        advice.evidence[0]["evidence"]
    )


def test_references_named_too_rarely_to_reach_the_count_do_not_raise_it() -> None:
    # an agent failing 19.4 % of its tasks, 46 references named in 2+ tasks: over all 46 the count
    # would be 5 (0.194^4 > 0.05 / 46), but only 6 were named in 4+ tasks: 0.194^4 <= 0.05 / 6
    assert needed_tasks(0.194, {2: 30, 3: 10, 4: 5, 30: 1}) == (4, 6)
    assert needed_tasks(0.194, {2: 30, 3: 10, 5: 5, 30: 1}) == (4, 6)
    assert needed_tasks(0.194, {4: 46}) == (5, 0)


def test_a_task_that_ended_on_a_class_this_agents_retries_fix_neither_counts_nor_clears_it(
    store: EventStore,
) -> None:
    # the agent's retries fix validation failures (10 of 10); one task naming the deleted SKU
    # stopped on one before its lookup ran: it failed, but says nothing of the SKU
    _record(store, deleted_tasks=6, validation_first=True, ended_on_validation=1)
    advice = _advise(build_advice_book(store), f"Move {DELETED} to aisle nine")
    assert advice.kinds == ["human_review"]
    words = advice.evidence[0]["evidence"]
    assert "7 earlier inventory-agent tasks, none succeeded (ended: 6 on logic, 1 on validation" in words
