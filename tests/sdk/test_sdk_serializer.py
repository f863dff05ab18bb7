"""The emitter's orjson serializer writes what the consumer reads exactly as pydantic's bytes."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from retrylens.ingest.processor import SourceRef, ValidEvent, process
from retrylens.schemas import EventKind, RetryEvent, SideEffectStatus
from retrylens.sdk import CallbackChannel, Governor, HandedOff, parse_policy
from retrylens.sdk.transport.serializer import event_bytes
from retrylens.store.event_table import EVENT_COLUMN_NAMES

START = datetime(2024, 5, 1, 12, 30, 15, 250_000, tzinfo=UTC)
SOURCE = SourceRef("events", 0, 1)
INGESTED_AT = EVENT_COLUMN_NAMES.index("ingested_at")


def governed_events() -> list[RetryEvent]:
    """A governor's output with every event kind, side-effect status and optional part."""
    events: list[RetryEvent] = []
    policy = parse_policy(
        {
            "shadow": {"candidate": {"caps": {"timeout": 0}}, "exploration": 0.05},
            "caps": {"timeout": 3, "network": 3, "logic": 0},
        }
    )
    governor = Governor.with_virtual_time(
        policy,
        start=START,
        emit=events.append,
        rng=random.Random(11),
        validate_events=False,
        handoff=CallbackChannel(lambda package: None),
    )
    governor.call(
        lambda: "ok",
        goal="Refund order A-17 for ana@example.com?",
        agent="support",
        dependency="gpt",
    )
    undo: list[object] = []
    inserted: list[int] = []

    def insert(n: int) -> int:
        inserted.append(n)
        if len(inserted) == 1:
            raise ConnectionResetError("insert aborted half-way")
        return n

    rows = governor.side_effect("crm.insert", rollback=lambda *a: undo.append(a))(insert)
    charge = governor.side_effect("payments.charge")(lambda amount: f"ch-{amount}")
    calls: list[int] = []

    def work() -> str:
        calls.append(1)
        charge(12)  # committed once, then skipped as a duplicate
        rows(len(calls))  # fails in attempt 1, and is rolled back before attempt 2
        if len(calls) == 2:
            raise TimeoutError("gateway timed out after 10 s")
        return "done"

    governor.call(work, goal="charge cart c-1 and record it", agent="checkout", dependency="psp")
    with pytest.raises(HandedOff):
        governor.call(lambda: {}["missing"], goal="cancel order 9", agent="support")
    return events


def _payload_checks(event: RetryEvent) -> tuple[ValidEvent, ValidEvent]:
    """The consumer's verdict on our bytes and on pydantic's (its row is what gets stored)."""
    ours = process(event_bytes(event), SOURCE)
    theirs = process(event.to_json_bytes(), SOURCE)
    assert isinstance(ours, ValidEvent), ours
    assert isinstance(theirs, ValidEvent), theirs
    return ours, theirs


def test_every_event_the_governor_emits_is_valid_and_reads_back_as_pydantics_bytes_do() -> None:
    events = governed_events()
    kinds = {e.kind for e in events}
    assert kinds == set(EventKind), f"missing kinds: {set(EventKind) - kinds}"
    statuses = {s.status for e in events for s in e.side_effects}
    assert statuses >= {
        SideEffectStatus.COMMITTED,
        SideEffectStatus.SKIPPED_DUPLICATE,
        SideEffectStatus.ROLLED_BACK,
    }
    assert any(e.context_snapshot and e.context_snapshot.last_messages for e in events)
    assert any(e.error_detail and e.error_detail.stack_digest for e in events)
    assert any(e.shadow and e.propensity for e in events)
    for event in events:
        ours, theirs = _payload_checks(event)
        parsed = RetryEvent.from_json_bytes(event_bytes(event))
        assert (
            parsed
            == RetryEvent.from_json_bytes(event.to_json_bytes())
            == RetryEvent.model_validate(event.model_dump())
        )
        strip = [i for i in range(len(ours.row)) if i != INGESTED_AT]
        assert [ours.row[i] for i in strip] == [theirs.row[i] for i in strip]


def test_the_bytes_are_pydantics_bytes() -> None:
    for event in governed_events():
        assert event_bytes(event) == event.to_json_bytes()


def test_what_orjson_cannot_write_falls_back_to_pydantic() -> None:
    event = governed_events()[0]
    huge = event.model_copy(update={"tokens_in": 2**70})
    assert event_bytes(huge) == huge.to_json_bytes()


def test_a_part_shared_by_events_is_written_alike_each_time() -> None:
    """Frozen parts (agent, memoised error details and snapshots) are written once and their
    bytes reused: every event still serializes to what pydantic writes, however often."""
    from retrylens.schemas.event import ContextMessage, ContextSnapshot

    events = governed_events()
    big = ContextSnapshot(
        message_count=1,
        last_messages=[ContextMessage(role="user", content="x" * 1_900) for _ in range(3)],
    )  # too large to keep
    events.append(events[-1].model_copy(update={"context_snapshot": big}))
    for _ in range(3):
        for event in events:
            assert event_bytes(event) == event.to_json_bytes()


def _padded(event: RetryEvent, size: int) -> RetryEvent:
    """``event`` with its decision reason padded so that its bytes are exactly ``size`` long."""
    bare = len(event_bytes(event.model_copy(update={"decision_reason": ""})))
    return event.model_copy(update={"decision_reason": "r" * (size - bare)})


def test_an_event_of_exactly_the_byte_limit_is_written_and_one_byte_more_is_refused() -> None:
    from retrylens.errors import EventTooLargeError
    from retrylens.schemas.limits import MAX_EVENT_BYTES

    event = governed_events()[0]
    assert len(event_bytes(_padded(event, MAX_EVENT_BYTES))) == MAX_EVENT_BYTES
    with pytest.raises(EventTooLargeError):
        event_bytes(_padded(event, MAX_EVENT_BYTES + 1))


def test_the_kept_bytes_of_parts_stay_bounded_in_count_and_size() -> None:
    """A long-lived agent makes parts without end: at most 256 are kept, none over 4 KiB, and
    each event is still written as pydantic writes it."""
    import orjson

    from retrylens.schemas.event import ContextMessage, ContextSnapshot
    from retrylens.sdk.transport import serializer

    event = governed_events()[0]
    for i in range(600):
        part = ContextSnapshot(message_count=i, last_messages=[
            ContextMessage(role="user", content="c" * (1_300 + i % 100)) for _ in range(3)])  # ~3.9-4.2 KiB written
        with_part = event.model_copy(update={"context_snapshot": part})
        assert event_bytes(with_part) == with_part.to_json_bytes()
        assert len(serializer._FRAGMENTS) <= 256
    sizes = [len(orjson.dumps(fragment)) for _, fragment in serializer._FRAGMENTS.values()]
    assert max(sizes) <= 4_096
    assert any(len(orjson.dumps(part.__dict__, default=serializer._part)) > 4_096 for part in [
        ContextSnapshot(message_count=1, last_messages=[ContextMessage(role="user", content="c" * 1_399)] * 3)])


def _parts(event: RetryEvent) -> list[object]:
    return [v for v in event.__dict__.values() if hasattr(type(v), "__pydantic_fields__")]


def test_every_part_of_an_event_is_kept_and_its_kept_bytes_are_what_is_written_next_time() -> None:
    """Parts are written once and their bytes reused: the kept fragment, not the part, is what
    the next event carrying the same part gets (seen by planting a marked fragment)."""
    import orjson

    from retrylens.sdk.transport import serializer

    event = max(governed_events(), key=lambda e: len(_parts(e)))
    parts = _parts(event)
    assert len(parts) >= 3
    serializer._FRAGMENTS.clear()
    try:
        event_bytes(event)
        assert all(id(p) in serializer._FRAGMENTS and serializer._FRAGMENTS[id(p)][0] is p for p in parts)
        agent = event.agent
        serializer._FRAGMENTS[id(agent)] = (agent, orjson.Fragment(b'{"name":"kept","role":""}'))
        assert orjson.loads(event_bytes(event))["agent"] == {"name": "kept", "role": ""}
    finally:
        serializer._FRAGMENTS.clear()


class _Foreign:
    """Not a part: an object someone put on an event, with a private attribute pydantic omits."""

    def __init__(self) -> None:
        self.message_count = 1
        self._hidden = "internal"


def test_a_foreign_object_on_an_event_is_written_as_pydantic_writes_it() -> None:
    import warnings

    event = governed_events()[0].model_copy(update={"context_snapshot": _Foreign()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic warns that the field holds an unexpected type
        expected = event.to_json_bytes()
        assert event_bytes(event) == expected and b"internal" not in expected
