"""A warm governed call runs only the governor's own code per call: no import machinery.

The first try is held to tenacity's cost (``bench/sdk_overhead.py``), a budget of ~11 µs a
call on this machine, so anything that runs per call matters. Timings flake on a shared
machine; the Python functions a call runs do not. An ``import`` statement inside the call
path runs importlib's ``_handle_fromlist``/``parent`` on every call (about a tenth of the
budget); a warm call must run none of it, sync or async.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from retrylens.sdk import Governor


@contextmanager
def python_calls() -> Iterator[list[str]]:
    """Every Python function called on this thread while the block runs, as file:name."""
    seen: list[str] = []

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            seen.append(f"{code.co_filename}:{code.co_name}")

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


def _governor(events: list[Any]) -> Governor:
    return Governor(project="p", emit=events.append, sleep=lambda s: None)


def _import_machinery(calls: list[str]) -> list[str]:
    return [c for c in calls if "importlib" in c or "<frozen" in c]


def _warm(call: Callable[[], object]) -> None:
    for _ in range(3):
        call()


def test_a_warm_first_try_runs_no_import_machinery() -> None:
    events: list[Any] = []
    g = _governor(events)

    def ok() -> int:
        return 1

    def call() -> object:
        return g.call(ok, goal="look up the order", agent="support")

    _warm(call)
    with python_calls() as calls:
        assert call() == 1
    assert calls, "the profile hook saw the call"
    assert any(c.endswith(":succeed") for c in calls), "the fast path ran"
    assert _import_machinery(calls) == []
    assert len(events) == 4, "one compact event a clean call"


def test_a_warm_async_first_try_runs_no_import_machinery() -> None:
    events: list[Any] = []
    g = _governor(events)

    async def ok() -> int:
        return 1

    async def main() -> list[str]:
        for _ in range(3):
            await g.acall(ok, goal="look up the order", agent="support")
        with python_calls() as calls:
            assert await g.acall(ok, goal="look up the order", agent="support") == 1
        return calls

    calls = asyncio.run(main())
    assert any(c.endswith(":succeed") for c in calls), "the fast path ran"
    assert _import_machinery(calls) == []


def test_a_warm_retried_call_runs_no_import_machinery() -> None:
    """The retry path opens a TaskRun: its class is looked up, not imported, per call."""
    events: list[Any] = []
    g = _governor(events)
    tries = {"n": 0}

    def flaky() -> int:
        tries["n"] += 1
        if tries["n"] % 2:
            raise TimeoutError("timed out")
        return 1

    def call() -> object:
        return g.call(flaky, goal="look up the order", agent="support")

    _warm(call)
    with python_calls() as calls:
        assert call() == 1
    assert any(c.endswith(":record_failure") for c in calls), "the retry path ran"
    assert _import_machinery(calls) == []
