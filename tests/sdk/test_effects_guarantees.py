"""The side-effect protocol's promises, read on what the tool saw, the key store and the
governor's decisions (issue 25 item 2: the survivors of mutating ``sdk/core/effects.py``).

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
    from retrylens.sdk.core.effects import has_contract

    def insert(name: str) -> None: ...

    def keyed(name: str, *, idempotency_key: str) -> None: ...

    assert not has_contract(insert)  # the safe default: not repeated after a timeout
    assert has_contract(keyed)
    assert has_contract(insert, verify=lambda name: True)
    assert has_contract(insert, rollback=lambda name: None)
    assert has_contract(insert, unsafe=True)
    assert has_contract(insert, repeat_on_timeout=True)


def test_an_effect_of_a_completed_step_is_kept_when_the_attempt_then_fails() -> None:
    """Rollback after a failed attempt spares the effects of steps marked complete: the
    effect is keyed and judged by the step it declares, not by the tool's name."""
    from retrylens.sdk import current_run

    reserved: list[str] = []
    released: list[str] = []
    runs = 0
    with capture_events() as captured:
        g = governor(emit=captured.emit)
        reserve = g.side_effect(
            "inventory.reserve", step="reserve-stock", rollback=released.append
        )(lambda item: reserved.append(item) or "r-1")

        def task() -> str:
            nonlocal runs
            runs += 1
            reserve("sku-1")
            run = current_run()
            assert run is not None
            run.complete_step("reserve-stock", "r-1")
            if runs == 1:
                raise TimeoutError("the model timed out after the reservation")
            return "ok"

        assert g.call(task, goal="reserve and confirm") == "ok"
        statuses = [
            s.status for e in captured.of_kind(EventKind.SIDE_EFFECT) for s in e.side_effects
        ]
    assert released == [] and reserved == ["sku-1"]  # kept, and not performed twice
    assert statuses == [SideEffectStatus.COMMITTED, SideEffectStatus.SKIPPED_DUPLICATE]


def test_the_contract_options_are_keywords() -> None:
    from retrylens.sdk.core.effects import has_contract

    with pytest.raises(TypeError):  # a positional option could be read as any of them
        has_contract(print, lambda: True)  # type: ignore[misc]


def test_a_side_effect_without_a_contract_is_retried_after_a_failure_that_is_not_a_timeout() -> (
    None
):
    """Refused before it reached the provider: nothing can have happened, so the safe
    default does not stop the task (only an ambiguous timeout does)."""
    rows: list[str] = []
    tries = 0

    def insert(name: str) -> str:
        nonlocal tries
        tries += 1
        if tries == 1:
            raise ConnectionRefusedError("crm refused the connection")
        rows.append(name)
        return "row-1"

    with capture_events() as captured:
        g = governor(emit=captured.emit)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wrapped = g.side_effect("crm.insert")(insert)
        assert g.call(lambda: wrapped("Ada"), goal="add Ada") == "row-1"
        statuses = [
            s.status for e in captured.of_kind(EventKind.SIDE_EFFECT) for s in e.side_effects
        ]
    assert rows == ["Ada"] and tries == 2
    assert statuses == [SideEffectStatus.FAILED, SideEffectStatus.COMMITTED]


# -- a task resumed with the key store of an earlier run (the process died mid-effect) ----
def resumed(status: SideEffectStatus, result: object = None) -> tuple[Governor, Any, str]:
    """A governor whose key store already holds ``payments`` for order A-17 of task t-1."""
    from retrylens.sdk import MemoryKeyStore
    from retrylens.sdk.core.side_effects import KeyRecord, idempotency_key

    store = MemoryKeyStore()
    key = idempotency_key("t-1", "payments", {"args": ("A-17",), "kwargs": {}})
    store.put(KeyRecord(key, "t-1", "payments", status, result))
    return governor(key_store=store), store, key


@pytest.mark.parametrize("status", [SideEffectStatus.INTENDED, SideEffectStatus.FAILED])
@pytest.mark.parametrize(
    ("answer", "result"),
    [("ch_9", "ch_9"), (1, 1), (True, None)],  # 1: a row id found, not a yes
)
def test_a_resumed_effect_that_verify_finds_done_is_not_performed_again(
    status: SideEffectStatus, answer: object, result: object
) -> None:
    charged: list[str] = []
    asked: list[str] = []

    def verify(order: str) -> object:
        asked.append(order)
        return answer

    g, store, key = resumed(status)
    charge = g.side_effect("payments", verify=verify)(
        lambda order: charged.append(order) or "ch_new"
    )
    assert g.call(lambda: charge("A-17"), goal="charge A-17", task_id="t-1") == result
    assert charged == [] and asked == ["A-17"]
    record = store.get(key)
    assert record is not None and record.status is SideEffectStatus.COMMITTED
    assert record.result == result


@pytest.mark.parametrize("status", [SideEffectStatus.INTENDED, SideEffectStatus.FAILED])
def test_a_resumed_effect_that_verify_finds_not_done_is_performed_once(
    status: SideEffectStatus,
) -> None:
    charged: list[str] = []
    g, store, key = resumed(status)
    charge = g.side_effect("payments", verify=lambda order: False)(
        lambda order: charged.append(order) or "ch_1"
    )
    assert g.call(lambda: charge("A-17"), goal="charge A-17", task_id="t-1") == "ch_1"
    assert charged == ["A-17"]
    assert store.get(key).status is SideEffectStatus.COMMITTED  # type: ignore[union-attr]


def test_a_committed_effect_is_skipped_and_its_stored_result_returned() -> None:
    charged: list[str] = []
    asked: list[str] = []
    g, _, _ = resumed(SideEffectStatus.COMMITTED, "ch_1")

    def verify(order: str) -> bool:
        asked.append(order)
        return False

    with capture_events() as captured:
        g = Governor.with_virtual_time(
            start=START, key_store=g.key_store, emit=captured.emit, rng=random.Random(5)
        )
        charge = g.side_effect("payments", verify=verify)(lambda order: charged.append(order))
        assert g.call(lambda: charge("A-17"), goal="charge A-17", task_id="t-1") == "ch_1"
        statuses = [
            s.status for e in captured.of_kind(EventKind.SIDE_EFFECT) for s in e.side_effects
        ]
    assert charged == [] and asked == []
    assert statuses == [SideEffectStatus.SKIPPED_DUPLICATE]


def test_a_rolled_back_effect_is_performed_again_without_asking_verify() -> None:
    charged: list[str] = []
    asked: list[str] = []
    g, _, _ = resumed(SideEffectStatus.ROLLED_BACK)

    def verify(order: str) -> bool:
        asked.append(order)
        return True

    charge = g.side_effect("payments", verify=verify)(lambda order: charged.append(order) or "ch_2")
    assert g.call(lambda: charge("A-17"), goal="charge A-17", task_id="t-1") == "ch_2"
    assert charged == ["A-17"] and asked == []


def test_an_unsafe_tool_is_handed_off_after_a_timeout_even_with_an_idempotency_key() -> None:
    keys: list[str] = []

    def charge(order: str, *, idempotency_key: str) -> str:
        keys.append(idempotency_key)
        raise TimeoutError("provider timed out")

    g = governor()
    wrapped = g.side_effect("payments", unsafe=True)(charge)
    with pytest.raises(TaskStopped) as stopped:
        g.call(lambda: wrapped("A-17"), goal="charge A-17")
    assert len(keys) == 1
    assert "declared unsafe to repeat" in stopped.value.verdict.reason


def test_a_tool_with_an_idempotency_key_is_repeated_with_the_same_key_after_a_timeout() -> None:
    keys: list[str] = []

    def charge(order: str, *, idempotency_key: str) -> str:
        keys.append(idempotency_key)
        if len(keys) == 1:
            raise TimeoutError("provider timed out")
        return "ch_1"

    g = governor()
    wrapped = g.side_effect("payments")(charge)
    assert g.call(lambda: wrapped("A-17"), goal="charge A-17") == "ch_1"
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0].startswith("payments:")


def test_an_effect_without_a_rollback_stays_done_when_its_attempt_then_fails() -> None:
    sent: list[str] = []
    runs = 0
    with capture_events() as captured:
        g = governor(emit=captured.emit)
        send = g.side_effect("mailer.send", repeat_on_timeout=True)(
            lambda to: sent.append(to) or "sent"
        )

        def task() -> str:
            nonlocal runs
            runs += 1
            send("ada@example.com")
            if runs == 1:
                raise ValueError("the model's answer did not parse")
            return "done"

        assert g.call(task, goal="welcome Ada") == "done"
        recorded = [
            (s.status, s.rollback)
            for e in captured.of_kind(EventKind.SIDE_EFFECT)
            for s in e.side_effects
        ]
    assert sent == ["ada@example.com"]  # sent once; nothing to undo, nothing "failed"
    assert recorded == [
        (SideEffectStatus.COMMITTED, None),
        (SideEffectStatus.SKIPPED_DUPLICATE, None),
    ]


def test_every_rollback_owed_runs_in_order_even_after_one_fails() -> None:
    reserved: list[str] = []
    released: list[str] = []
    runs = 0

    def release(item: str) -> None:
        released.append(item)
        if item == "sku-1":
            raise ConnectionError("inventory unreachable")

    with capture_events() as captured:
        g = governor(emit=captured.emit)
        reserve = g.side_effect("inventory.reserve", rollback=release)(
            lambda item: reserved.append(item) or f"r-{item}"
        )

        def task() -> str:
            nonlocal runs
            runs += 1
            reserve("sku-1")
            reserve("sku-2")
            if runs == 1:
                raise TimeoutError("the model timed out after the reservations")
            return "ok"

        assert g.call(task, goal="reserve two and confirm") == "ok"
        recorded = [
            (s.status, s.rollback)
            for e in captured.of_kind(EventKind.SIDE_EFFECT)
            for s in e.side_effects
        ]
    assert released == ["sku-1", "sku-2"]
    assert (SideEffectStatus.FAILED, "failed") in recorded  # sku-1's rollback, recorded
    assert (SideEffectStatus.ROLLED_BACK, "done") in recorded  # sku-2's, done after it
    assert reserved == ["sku-1", "sku-2", "sku-2"]  # sku-1 still committed: not performed again


@pytest.mark.parametrize("status", [SideEffectStatus.INTENDED, SideEffectStatus.FAILED])
def test_a_resumed_effect_whose_verify_breaks_is_not_performed_blindly(
    status: SideEffectStatus,
) -> None:
    charged: list[str] = []

    def verify(order: str) -> bool:
        raise ConnectionError("ledger unreachable")

    g, store, key = resumed(status)
    charge = g.side_effect("payments", verify=verify)(lambda order: charged.append(order))
    with pytest.raises(TaskStopped) as stopped:
        g.call(lambda: charge("A-17"), goal="charge A-17", task_id="t-1")
    assert charged == []
    assert "ambiguous outcome of side effect payments: its verify failed (ConnectionError" in (
        stopped.value.verdict.reason
    )
    assert store.get(key).status is status  # type: ignore[union-attr]


def test_the_run_api_repeats_a_side_effect_declared_harmless_twice() -> None:
    """``TaskRun.side_effect`` without the decorator: only the options given apply."""
    from retrylens.sdk import current_run

    rows: list[str] = []

    def upsert(name: str) -> str:
        rows.append(name)
        if len(rows) == 1:
            raise TimeoutError("crm timed out after writing")
        return "row-1"

    def task() -> str:
        run = current_run()
        assert run is not None
        return run.side_effect("crm.upsert", upsert, "Ada", repeat_on_timeout=True)

    g = governor()
    assert g.call(task, goal="upsert Ada") == "row-1"
    assert rows == ["Ada", "Ada"]


def test_the_run_api_without_options_does_not_repeat_a_timed_out_side_effect() -> None:
    from retrylens.sdk import current_run

    rows: list[str] = []

    def insert(name: str) -> str:
        rows.append(name)
        raise TimeoutError("crm timed out after writing")

    def task() -> str:
        run = current_run()
        assert run is not None
        return run.side_effect("crm.insert", insert, "Ada")

    g = governor()
    with pytest.raises(TaskStopped) as stopped:
        g.call(task, goal="add Ada")
    assert rows == ["Ada"]
    assert "crm.insert declares no way to tell" in stopped.value.verdict.reason


def test_a_tool_that_is_not_callable_fails_as_a_recorded_side_effect() -> None:
    """Bad input at the boundary: the call's TypeError, recorded like any failed effect."""
    from retrylens.sdk import current_run

    def task() -> object:
        run = current_run()
        assert run is not None
        return run.side_effect("crm.insert", "not a function", "Ada", repeat_on_timeout=True)

    with capture_events() as captured:
        g = governor(emit=captured.emit)
        with pytest.raises(TaskStopped) as stopped:
            g.call(task, goal="add Ada")
        statuses = {
            s.status for e in captured.of_kind(EventKind.SIDE_EFFECT) for s in e.side_effects
        }
    assert isinstance(stopped.value.last_error, TypeError)
    assert statuses == {SideEffectStatus.FAILED}
