"""Safe by default: a side effect with no contract is never repeated blindly, and the plain
wiring (``governor.call`` around the task, tools decorated) retries only what is unfinished."""

from __future__ import annotations

import asyncio
import random
import warnings
from datetime import UTC, datetime
from typing import Any

import pytest

from retrylens.errors import GaveUp, HandedOff
from retrylens.schemas import Decision, EventKind
from retrylens.sdk import CallbackChannel, Governor
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)


def governor(**kwargs: Any) -> Governor:
    kwargs.setdefault("rng", random.Random(5))
    return Governor.with_virtual_time(start=START, **kwargs)


class Crm:
    """A provider whose insert lands, then times out on the way back (the ambiguous case)."""

    def __init__(self) -> None:
        self.rows: list[str] = []
        self.fail_after = 1

    def insert(self, name: str) -> str:
        self.rows.append(name)
        if self.fail_after:
            self.fail_after -= 1
            raise TimeoutError("crm timed out after writing")
        return f"row-{len(self.rows)}"

    async def ainsert(self, name: str) -> str:
        await asyncio.sleep(0)
        return self.insert(name)


def test_a_side_effect_without_a_contract_is_handed_off_not_repeated() -> None:
    crm = Crm()
    with capture_events() as captured:
        g = governor(emit=captured.emit, handoff=CallbackChannel(lambda p: None))
        with pytest.warns(UserWarning, match="no contract"):
            insert = g.side_effect("crm.insert.sync")(crm.insert)
        with pytest.raises(HandedOff) as stopped:
            g.call(lambda: insert("Ada"), goal="add Ada")
        decisions = captured.of_kind(EventKind.DECISION)
    assert crm.rows == ["Ada"]  # never repeated
    reason = stopped.value.verdict.reason
    assert "crm.insert.sync" in reason
    for fix in ("verify=", "idempotency_key", "repeat_on_timeout=True", "unsafe=True"):
        assert fix in reason
    assert decisions[-1].decision == Decision.HANDOFF_HUMAN
    assert decisions[-1].decision_reason == reason


def test_an_async_side_effect_without_a_contract_gives_up_without_a_channel() -> None:
    crm = Crm()
    g = governor()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        insert = g.side_effect("crm.insert.async")(crm.ainsert)

    async def task() -> str:
        return await insert("Ada")

    with pytest.raises(GaveUp) as stopped:
        asyncio.run(g.acall(task, goal="add Ada"))
    assert crm.rows == ["Ada"]
    assert "not repeated blindly" in stopped.value.verdict.reason


def test_repeat_on_timeout_repeats_a_side_effect_that_is_harmless_twice() -> None:
    crm = Crm()
    g = governor()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a declared contract: no warning
        insert = g.side_effect("crm.upsert", repeat_on_timeout=True)(crm.insert)
    assert g.call(lambda: insert("Ada"), goal="upsert Ada") == "row-2"
    assert crm.rows == ["Ada", "Ada"]


def test_decorating_a_tool_without_a_contract_warns_once() -> None:
    g = governor()
    with pytest.warns(UserWarning) as first:
        g.side_effect("mailer.send.once")(lambda to: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g.side_effect("mailer.send.once")(lambda to: None)
    assert len(first) == 1


def test_tools_with_a_contract_do_not_warn() -> None:
    g = governor()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g.side_effect("a", verify=lambda: True)(lambda: None)
        g.side_effect("b", unsafe=True)(lambda: None)
        g.side_effect("c")(lambda *, idempotency_key: None)
        g.side_effect("d", rollback=lambda: None)(lambda: None)


# -- the plain wiring: governor.call + decorated tools -----------------------------------
def test_a_read_only_tool_is_retried_in_place_and_completed_work_is_not_re_run() -> None:
    runs, reads, lookups = 0, 0, 0
    crm = Crm()
    crm.fail_after = 0
    g = governor()

    @g.tool()
    def read_order(order: str) -> str:
        nonlocal reads
        reads += 1
        return f"{order}: 2 items"

    @g.tool(dependency="stock")
    def check_stock(order: str) -> bool:
        nonlocal lookups
        lookups += 1
        if lookups == 1:
            raise ConnectionError("stock service reset the connection")
        return True

    insert = g.side_effect("crm.insert", verify=lambda name: name in crm.rows)(crm.insert)

    def task() -> str:
        nonlocal runs
        runs += 1
        insert("A-17")
        read_order("A-17")
        check_stock("A-17")
        return "ready"

    assert g.call(task, goal="prepare A-17") == "ready"
    assert (runs, reads, lookups) == (1, 1, 2)
    assert crm.rows == ["A-17"]


def test_a_re_run_task_gets_a_completed_tools_stored_answer() -> None:
    runs, reads = 0, 0
    g = governor()

    @g.tool()
    def read_order(order: str) -> str:
        nonlocal reads
        reads += 1
        return f"{order}: {reads}"

    def task() -> str:
        nonlocal runs
        runs += 1
        answer = read_order("A-17")
        if runs == 1:
            raise TimeoutError("the model timed out after the read")
        return answer

    assert g.call(task, goal="g") == "A-17: 1"
    assert (runs, reads) == (2, 1)


def test_the_same_tool_call_twice_in_one_pass_runs_twice() -> None:
    polls = 0
    g = governor()

    @g.tool()
    def poll(job: str) -> int:
        nonlocal polls
        polls += 1
        return polls

    assert g.call(lambda: (poll("j"), poll("j")), goal="poll") == (1, 2)


def test_an_async_tool_is_retried_in_place_inside_acall() -> None:
    runs, reads = 0, 0
    g = governor()

    @g.tool()
    async def read_order(order: str) -> str:
        nonlocal reads
        reads += 1
        if reads == 1:
            raise TimeoutError("orders timed out")
        return order

    async def task() -> str:
        nonlocal runs
        runs += 1
        return await read_order("A-17")

    assert asyncio.run(g.acall(task, goal="g")) == "A-17"
    assert (runs, reads) == (1, 2)


def test_a_tool_outside_a_governed_call_is_just_called() -> None:
    g = governor()
    assert g.tool()(lambda x: x * 2)(21) == 42
