"""Events built on the fast path (no validation) equal the validated ones, field for field."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from retrylens.schemas import RetryEvent
from retrylens.sdk import GaveUp, Governor, parse_policy

START = datetime(2024, 5, 1, 12, 30, 15, 250_000, tzinfo=UTC)


def _events(validate: bool) -> list[RetryEvent]:
    events: list[RetryEvent] = []
    governor = Governor.with_virtual_time(
        parse_policy({"caps": {"timeout": 2}}),
        start=START,
        emit=events.append,
        rng=random.Random(5),
        validate_events=validate,
    )
    state = {"n": 0}

    def flaky(attempt: object) -> str:
        state["n"] += 1
        if state["n"] < 3:
            raise TimeoutError("upstream timed out for Mei Chen, key sk-abcdefghijklmnopqrstuv")
        return "ok"

    governor.call(flaky, goal="Summarise ticket 41 for ana@example.com", agent="support")
    governor.call(lambda: "ok", goal="a clean first try", agent="support", dependency="gpt")
    with pytest.raises(GaveUp):
        governor.call(lambda: {}["missing"], goal="cancel order 9", agent="support")
    return events


def test_unvalidated_events_equal_validated_ones_and_validate_themselves() -> None:
    fast, checked = _events(False), _events(True)
    assert len(fast) == len(checked) > 8
    for quick, slow in zip(fast, checked, strict=True):
        assert quick.model_dump() == slow.model_dump()
        assert RetryEvent.model_validate(quick.model_dump()) == slow
    assert any(e.context_snapshot and e.context_snapshot.last_messages for e in fast)


def test_no_secret_or_name_reaches_an_unvalidated_event() -> None:
    text = "".join(e.to_json_bytes().decode() for e in _events(False))
    assert "sk-abcdefghijklmnopqrstuv" not in text
    assert "Mei Chen" not in text
    assert "ana@example.com" not in text


def test_a_memoised_snapshot_is_the_snapshot_of_the_context_it_describes() -> None:
    from retrylens.sdk.core.events import EventFactory
    from retrylens.sdk.text.context import snapshot

    factory = EventFactory(project="p", wall=lambda: START, rng=random.Random(1), validate=False)
    base = [{"role": "user", "content": "Refund order 7"}]
    upper = [{"role": "user", "content": "REFUND ORDER 7"}]  # same digest, other text
    errored = [*base, {"role": "tool", "content": "Error: timeout", "tool": "crm", "args": {"a": 1}}]
    big = [{"role": "user", "content": "x " * 6_000}]  # too large to memoise
    for messages in (base, upper, errored, base, errored, big, big):
        for kwargs in ({}, {"last": 0}, {"previous": ["0" * 16]}):
            got = factory.context_snapshot(messages, **kwargs)
            assert got.model_dump() == snapshot(messages, **kwargs).model_dump()
    assert factory.context_snapshot(base) is factory.context_snapshot([dict(base[0])])
    assert factory.context_snapshot(big) is not factory.context_snapshot(big)


def test_memoised_digests_and_pollution_are_those_of_the_context_they_describe() -> None:
    from retrylens.sdk.text.context import _digests_and_pollution, digests_and_pollution

    base = [{"role": "user", "content": "Refund order 7"}]
    contexts = [
        base,
        [{"role": "user", "content": "REFUND ORDER 7"}],  # same digest, other text
        [*base, {"role": "tool", "content": "Error: timeout", "tool": "crm", "args": {"a": 1}}],
        [*base, {"role": "tool", "content": "ok", "tool": "crm", "args": {"a": 1}}] * 2,
        [{"role": "user", "content": "x", "tool": None}],  # digests unlike a message without one
        [{"role": "user", "content": "x"}],
        [{"role": "system", "content": "note", "summary": True}, *base],
        [{"role": "user", "content": "x " * 6_000}],  # too large to memoise
    ]
    for messages in contexts * 2:
        got = digests_and_pollution(messages)
        assert got == _digests_and_pollution(messages)
        got[0].append("mutated by a caller")  # a caller's list is its own
        assert digests_and_pollution(messages) == _digests_and_pollution(messages)
