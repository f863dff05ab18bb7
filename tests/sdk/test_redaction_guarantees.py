"""Every free-text field of an event is redacted before it leaves: the decision reason too,
a deployment's own patterns everywhere, and each processor of the chain does its one job.

Asserted on emitted (flushed) event bytes through a governor built with default settings,
and on each processor called alone on the events a governor without processors emits.
"""

from __future__ import annotations

import gc
import random
import weakref
from datetime import UTC, datetime

import pytest

from retrylens.errors import TaskStopped
from retrylens.schemas import EventKind, RetryEvent
from retrylens.schemas.limits import MAX_REASON_CHARS
from retrylens.sdk import Governor
from retrylens.sdk.text.processors import (
    default_processors,
    process,
    redact_event,
    sample,
    truncate_event,
)
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)
KEY = "sk-proj-Zx81QmT4vB7nR2pL9sK3wY6d"
#: a step name a user might write: the person and the key it works with (51 characters)
STEP = f"refund José Álvarez {KEY}"
LEAKS = [b"Jos", b"lvarez", KEY.encode(), b"Zx81QmT4vB7nR2pL9sK3wY6d"]


def _down(_: int) -> str:
    raise TimeoutError("lookup failed")


def _stopped_in_a_named_step(gov: Governor) -> None:
    with pytest.raises(TaskStopped):
        gov.call(lambda: gov.step(STEP, _down, 0), goal="refund an order", agent="ops")


def _raw_events(work=None, goal: str = "refund José Álvarez") -> list[RetryEvent]:  # noqa: ANN001
    """The events of one task as the governor builds them, before any processor."""
    raw: list[RetryEvent] = []
    gov = Governor.with_virtual_time(
        start=START, rng=random.Random(7), processors=[], emit=raw.append
    )
    if work is None:
        _stopped_in_a_named_step(gov)
    else:
        gov.call(work, goal=goal, agent="ops")
    return raw


def _fails_once(message: str):  # noqa: ANN202
    def work(attempt) -> str:  # noqa: ANN001
        if attempt.number == 1:
            raise ConnectionError(message)
        return "ok"

    return work


# -- the decision reason -------------------------------------------------------------------------
def test_a_name_and_a_key_in_a_step_name_never_reach_the_decision_event() -> None:
    """A step cap's reason quotes the step's name; the name is the user's text."""
    with capture_events() as captured:
        gov = Governor.with_virtual_time(start=START, rng=random.Random(7), emit=captured.emit)
        _stopped_in_a_named_step(gov)
        blob = b"".join(k + v for k, v in captured.records())
        (stop,) = [
            e for e in captured.of_kind(EventKind.DECISION) if "step cap" in e.decision_reason
        ]
    for leak in LEAKS:
        assert leak not in blob, f"{leak!r} leaked"
    assert stop.decision_reason == (
        "step cap of step 'refund [NAME] [REDACTED_KEY]': timeout retry cap reached (3/3 retries)"
    )


def test_the_raw_decision_reason_does_hold_the_step_name() -> None:
    """The test above proves something: without processors the reason carries the secret."""
    reasons = [e.decision_reason for e in _raw_events()]
    assert any(KEY in r and "José Álvarez" in r for r in reasons)


# -- a deployment's own patterns -----------------------------------------------------------------
def test_a_deployments_pattern_is_applied_to_the_message_the_reason_and_the_context() -> None:
    """``default_processors(pii_patterns)``: an account number in lower case text (the
    replacement sorts before it) is replaced wherever it appears."""
    with capture_events() as captured:
        gov = Governor.with_virtual_time(
            start=START,
            rng=random.Random(7),
            emit=captured.emit,
            processors=default_processors([r"acct-\d+"]),
        )
        message = "lookup failed for acct-55501"
        assert gov.call(_fails_once(message), goal="close acct-55501", agent="ops") == "ok"
        blob = b"".join(k + v for k, v in captured.records())
        (failed,) = captured.of_kind(EventKind.ATTEMPT_FAILED)
    assert b"acct-55501" not in blob and b"55501" not in blob
    assert failed.error_detail is not None
    assert failed.error_detail.message == "ConnectionError: lookup failed for [NAME]"
    assert failed.context_snapshot is not None
    assert [m.content for m in failed.context_snapshot.last_messages] == ["close [NAME]"]


def test_a_pattern_and_a_replacement_of_ones_own_in_the_decision_reason() -> None:
    processor = redact_event([r"[a-z]{3}-[a-z]{4}-\w+"], replacement="<id>", names=False)
    (stop,) = [processor(e) for e in _raw_events() if "step cap" in e.decision_reason]
    assert stop.decision_reason == (
        "step cap of step 'refund José Álvarez [REDACTED_KEY]': timeout retry cap reached (3/3 retries)"
    )
    mine = redact_event([r"Álvarez"], replacement="<surname>", names=False)
    (stop,) = [mine(e) for e in _raw_events() if "step cap" in e.decision_reason]
    assert "refund José <surname> [REDACTED_KEY]" in stop.decision_reason


# -- each processor alone ------------------------------------------------------------------------
def test_redact_event_alone_cleans_every_free_text_field_and_nothing_else() -> None:
    raw = _raw_events(_fails_once("refund failed for Chen, Mei"), goal="refund José Álvarez")
    cleaned = [redact_event()(e) for e in raw]
    by_kind = {e.kind: e for e in cleaned}
    failed = by_kind[EventKind.ATTEMPT_FAILED]
    assert failed.error_detail is not None
    assert failed.error_detail.message == "ConnectionError: refund failed for [NAME]"
    assert failed.context_snapshot is not None
    assert [m.content for m in failed.context_snapshot.last_messages] == ["refund [NAME]"]
    for before, after in zip(raw, cleaned, strict=True):  # every other field as it was
        keep = {"decision_reason", "error_detail", "context_snapshot"}
        assert before.model_dump(exclude=keep) == after.model_dump(exclude=keep)
        if before.error_detail is not None and after.error_detail is not None:
            assert before.error_detail.model_dump(
                exclude={"message"}
            ) == after.error_detail.model_dump(exclude={"message"})


def test_redact_event_alone_keeps_names_when_told_to() -> None:
    raw = _raw_events(_fails_once(f"refund failed for Chen, Mei with {KEY}"))
    (failed,) = [redact_event(names=False)(e) for e in raw if e.kind is EventKind.ATTEMPT_FAILED]
    assert failed.error_detail is not None
    assert (
        failed.error_detail.message
        == "ConnectionError: refund failed for Chen, Mei with [REDACTED_KEY]"
    )
    assert failed.context_snapshot is not None
    assert [m.content for m in failed.context_snapshot.last_messages] == ["refund José Álvarez"]


def test_an_event_with_nothing_to_redact_is_passed_on_as_it_is() -> None:
    """No copy for clean events: the chain runs on seven events a retry."""
    raw = _raw_events(_fails_once("connection reset by peer"), goal="look the order up")
    processor = redact_event()
    assert any(e.context_snapshot is not None for e in raw)
    assert all(processor(e) is e for e in raw)


def test_an_event_whose_clean_text_is_an_equal_copy_is_passed_on_as_it_is() -> None:
    """The memo answers an equal text with the string it cleaned first: still no copy."""
    raw = _raw_events(_fails_once("connection reset by peer"), goal="look the order up")
    (failed,) = [e for e in raw if e.kind is EventKind.ATTEMPT_FAILED]
    assert failed.error_detail is not None and failed.context_snapshot is not None
    processor = redact_event()
    assert processor(failed) is failed
    message = "".join(list(failed.error_detail.message))  # equal, another object
    (content,) = [m.content for m in failed.context_snapshot.last_messages]
    snap = failed.context_snapshot.model_copy(
        update={
            "last_messages": [
                failed.context_snapshot.last_messages[0].model_copy(
                    update={"content": "".join(list(content))}
                )
            ]
        }
    )
    twin = failed.model_copy(
        update={
            "error_detail": failed.error_detail.model_copy(update={"message": message}),
            "context_snapshot": snap,
        }
    )
    assert twin.error_detail is not None and twin.error_detail.message is message
    assert processor(twin) is twin


@pytest.mark.parametrize("field", ["decision_reason", "error_detail", "context_snapshot"])
def test_each_free_text_field_alone_is_redacted(field: str) -> None:
    raw = _raw_events(_fails_once("refund failed for Chen, Mei"), goal="refund José Álvarez")
    (failed,) = [e for e in raw if e.kind is EventKind.ATTEMPT_FAILED]
    only = {
        "decision_reason": "" if field != "decision_reason" else "stopped for José Álvarez",
        "error_detail": None if field != "error_detail" else failed.error_detail,
        "context_snapshot": None if field != "context_snapshot" else failed.context_snapshot,
    }
    cleaned = redact_event()(failed.model_copy(update=only))
    text = cleaned.model_dump_json()
    for word in ("José", "Álvarez", "Chen", "Mei"):
        assert word not in text, f"{word!r} leaked from {field}"
    assert "[NAME]" in text


def test_a_snapshot_shared_by_events_is_cleaned_once_into_one_object() -> None:
    raw = _raw_events(_fails_once("connection reset by peer"), goal="refund José Álvarez")
    (failed,) = [e for e in raw if e.kind is EventKind.ATTEMPT_FAILED]
    twin = failed.model_copy()  # the same snapshot object, as memoised snapshots are shared
    assert twin.context_snapshot is failed.context_snapshot
    processor = redact_event()
    first, second = processor(failed), processor(twin)
    assert first.context_snapshot is not None
    assert [m.content for m in first.context_snapshot.last_messages] == ["refund [NAME]"]
    assert second.context_snapshot is first.context_snapshot


def _processed(processor: redact_event, failed: RetryEvent, snap: object) -> object:
    return processor(failed.model_copy(update={"context_snapshot": snap})).context_snapshot


def test_snapshots_met_in_turn_are_each_cleaned_once() -> None:
    raw = _raw_events(_fails_once("connection reset by peer"), goal="refund José Álvarez")
    (failed,) = [e for e in raw if e.kind is EventKind.ATTEMPT_FAILED]
    assert failed.context_snapshot is not None
    processor = redact_event()
    a, b = failed.context_snapshot, failed.context_snapshot.model_copy()
    first_a, first_b = _processed(processor, failed, a), _processed(processor, failed, b)
    assert _processed(processor, failed, a) is first_a
    assert _processed(processor, failed, b) is first_b
    assert first_a is not first_b


@pytest.mark.parametrize(("others", "kept"), [(511, True), (512, False)])
def test_the_snapshot_memo_holds_the_last_512_snapshots_and_no_more(
    others: int, kept: bool
) -> None:
    """A long-running agent makes a snapshot per failure: the memo's memory is bounded."""
    raw = _raw_events(_fails_once("connection reset by peer"), goal="refund José Álvarez")
    (failed,) = [e for e in raw if e.kind is EventKind.ATTEMPT_FAILED]
    assert failed.context_snapshot is not None
    processor = redact_event()
    first = failed.context_snapshot.model_copy()
    alive = weakref.ref(first)
    _processed(processor, failed, first)
    del first
    for _ in range(others):
        snap = failed.context_snapshot.model_copy()
        assert _processed(processor, failed, snap) is not snap
    gc.collect()
    assert (alive() is not None) is kept


def _with_reason(reason: str) -> RetryEvent:
    (decision,) = [e for e in _raw_events() if "step cap" in e.decision_reason]
    return decision.model_copy(update={"decision_reason": reason})


@pytest.mark.parametrize("extra", [1, 2, 500])
def test_truncate_event_alone_cuts_a_long_reason_to_the_limit_with_an_ellipsis(extra: int) -> None:
    reason = "r" * (MAX_REASON_CHARS + extra)
    cut = truncate_event()(_with_reason(reason))
    assert cut.decision_reason == "r" * (MAX_REASON_CHARS - 1) + "…"
    assert len(cut.decision_reason) == MAX_REASON_CHARS


@pytest.mark.parametrize("length", [0, 1, MAX_REASON_CHARS - 1, MAX_REASON_CHARS])
def test_truncate_event_alone_keeps_a_reason_within_the_limit(length: int) -> None:
    event = _with_reason("r" * length)
    assert truncate_event()(event) is event


def test_sample_alone_keeps_what_keep_says() -> None:
    events = _raw_events()
    decisions = sample(lambda e: e.kind is EventKind.DECISION)
    kept = [decisions(e) for e in events]
    assert [e for e in kept if e is not None] == [e for e in events if e.kind is EventKind.DECISION]
    assert kept.count(None) == sum(e.kind is not EventKind.DECISION for e in events)


def test_process_runs_the_chain_in_order_and_stops_at_a_dropped_event() -> None:
    events = _raw_events()
    seen: list[str] = []

    def note(event: RetryEvent) -> RetryEvent:
        seen.append(event.decision_reason)
        return event

    chain = [
        redact_event(),
        sample(lambda e: "step cap" in e.decision_reason),
        note,
        truncate_event(),
    ]
    out = [process(chain, e) for e in events]
    (stop,) = [e for e in out if e is not None]
    assert seen == [stop.decision_reason] and "[REDACTED_KEY]" in stop.decision_reason
    assert process([], events[0]) is events[0]
    assert process([sample(lambda e: False), note], events[0]) is None and len(seen) == 1
