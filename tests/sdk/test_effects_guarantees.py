"""The side-effect protocol's promises, read on what the tool saw, the key store and the
governor's decisions (issue 25 item 2: the survivors of mutating ``sdk/effects.py``).

A governor on virtual time, tools wrapped with ``governor.side_effect`` as a user does.
"""

from __future__ import annotations

import random
import warnings
from datetime import UTC, datetime
from typing import Any

import pytest

from retrylens.errors import TaskStopped
from retrylens.schemas import EventKind, SideEffectStatus
from retrylens.sdk import Governor
from retrylens.testing import capture_events

START = datetime(2026, 12, 1, tzinfo=UTC)


def governor(**kwargs: Any) -> Governor:
    kwargs.setdefault("rng", random.Random(5))
    return Governor.with_virtual_time(start=START, **kwargs)


def side_effects(events: list[Any]) -> list[tuple[str, str]]:
    return [
        (s.tool, s.status.value)
        for e in events
        if e.kind is EventKind.SIDE_EFFECT
        for s in e.side_effects
    ]


def test_a_builtin_method_can_be_a_side_effect() -> None:
    """A C method without a readable signature (``set.add``) takes no idempotency key."""
    sent: set[str] = set()
    g = governor()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        add = g.side_effect("outbox.add", repeat_on_timeout=True)(sent.add)
    g.call(lambda: add("mail-1"), goal="queue a mail")
    assert sent == {"mail-1"}


LONG = "crm." + "x" * 300  # a generated tool name longer than any stored name


def test_a_long_tool_name_is_cut_to_128_characters_in_the_reason_when_verify_breaks() -> None:
    def broken_verify(name: str) -> bool:
        raise ConnectionError("ledger unreachable")

    g = governor()
    insert = g.side_effect(LONG, verify=broken_verify)(_timing_out)
    with pytest.raises(TaskStopped) as stopped:
        g.call(lambda: insert("Ada"), goal="add Ada")
    reason = stopped.value.verdict.reason
    assert f"ambiguous outcome of side effect {LONG[:128]}: its verify failed" in reason


def test_a_long_tool_name_is_cut_to_128_characters_in_the_reason_without_a_contract() -> None:
    g = governor()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        insert = g.side_effect(LONG)(_timing_out)
    with pytest.raises(TaskStopped) as stopped:
        g.call(lambda: insert("Ada"), goal="add Ada")
    assert f"ambiguous outcome of side effect {LONG[:128]}: it may have happened" in (
        stopped.value.verdict.reason
    )


def _timing_out(name: str) -> str:
    raise TimeoutError("crm timed out")


def test_a_long_rollback_name_is_recorded_cut_to_128_characters() -> None:
    rows: list[str] = []

    def undo(name: str) -> None:
        rows.remove(name)

    undo.__name__ = "undo_" + "y" * 300
    calls = 0

    def insert(name: str) -> str:
        nonlocal calls
        calls += 1
        rows.append(name)
        if calls == 1:
            raise TimeoutError("crm timed out after writing")
        return "row"

    with capture_events() as captured:
        g = governor(emit=captured.emit)
        wrapped = g.side_effect("crm.insert", rollback=undo)(insert)
        assert g.call(lambda: wrapped("Ada"), goal="add Ada") == "row"
        recorded = [
            (s.status, s.rollback)
            for e in captured.of_kind(EventKind.SIDE_EFFECT)
            for s in e.side_effects
        ]
    assert rows == ["Ada"]  # written, undone, written again
    assert (SideEffectStatus.FAILED, undo.__name__[:128]) in recorded
    assert (SideEffectStatus.ROLLED_BACK, "done") in recorded
    assert recorded[-1] == (SideEffectStatus.COMMITTED, None)


def test_a_side_effect_named_by_its_step_is_keyed_by_the_step() -> None:
    """Two tools doing one step's effect (a provider switched) share the step's key."""
    with capture_events() as captured:
        g = governor(emit=captured.emit)
        send = g.side_effect("mailer.send", step="welcome-mail", repeat_on_timeout=True)(
            lambda to: f"sent to {to}"
        )
        assert (
            g.call(lambda: send("ada@example.com"), goal="welcome Ada") == "sent to ada@example.com"
        )
        (recorded,) = [s for e in captured.of_kind(EventKind.SIDE_EFFECT) for s in e.side_effects]
    assert recorded.tool == "mailer.send"
    assert recorded.idempotency_key.startswith("welcome-mail:")


def test_the_same_side_effect_twice_in_an_attempt_is_seen_as_a_repeated_call() -> None:
    with capture_events() as captured:
        g = governor(emit=captured.emit)
        send = g.side_effect("mailer.send", repeat_on_timeout=True)(lambda to: "sent")
        tries = 0

        def task() -> str:
            nonlocal tries
            tries += 1
            send("ada@example.com")
            send("ada@example.com")  # a loop in the agent: the same call again
            if tries == 1:
                raise ValueError("the model's answer did not parse")
            return "done"

        assert g.call(task, goal="welcome Ada") == "done"
        (failed,) = captured.of_kind(EventKind.ATTEMPT_FAILED)
    assert failed.context_snapshot is not None
    assert failed.context_snapshot.repeated_tool_calls == 1


def test_a_function_alone_has_no_contract_and_each_declaration_is_one() -> None:
    from retrylens.sdk.effects import has_contract

    def insert(name: str) -> None: ...

    def keyed(name: str, *, idempotency_key: str) -> None: ...

    assert not has_contract(insert)  # the safe default: not repeated after a timeout
    assert has_contract(keyed)
    assert has_contract(insert, verify=lambda name: True)
    assert has_contract(insert, rollback=lambda name: None)
    assert has_contract(insert, unsafe=True)
    assert has_contract(insert, repeat_on_timeout=True)
