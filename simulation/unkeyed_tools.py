"""Multi-step tasks whose tools take no idempotency key, under three wirings of the same code.

Each task runs a few steps in order — reads (a lookup that may time out or reset) and
writes (an insert into a CRM, a ticket, an email) whose provider takes no key and may
time out *after* the effect landed. The same seeded faults meet:

* ``naive``: every tool call retried in place up to ``retries`` times (tenacity-style);
* ``plain``: the wiring a new user writes first — ``governor.call`` around the task, read
  tools decorated ``@governor.tool``, write tools ``@governor.side_effect(name)`` with no
  contract at all. The governor's safe default never repeats such a write after an
  ambiguous failure: the task goes to a person instead;
* ``verified``: the same, each write given ``verify=`` (did the row land?): the governor
  asks instead of repeating, and the task finishes.

A duplicate is an effect that landed more than once for one (task, step). Virtual time:
nothing sleeps. ``run_unkeyed`` is what ``retrylens simulate`` prints beside the fleet.
(The budget study of long tasks, issue 24, has its own seeded tool boundary; this module
asks a different question — what the *default* contract does — with reads and writes.)
"""

from __future__ import annotations

import random
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from retrylens.errors import TaskStopped
from retrylens.sdk import CallbackChannel, Governor, RetryPolicy
from retrylens.sdk.core.policy import BackoffPolicy

WIRINGS = ("naive", "plain", "verified")
_START = datetime(2024, 5, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Faults:
    """Per call: a read times out / resets; a write fails before it lands / after it landed."""

    read_timeout: float = 0.08
    read_reset: float = 0.05
    write_before: float = 0.06
    write_after: float = 0.08
    steps: tuple[str, ...] = ("lookup", "insert", "lookup", "ticket", "email")


@dataclass
class UnkeyedResult:
    wiring: str
    tasks: int = 0
    succeeded: int = 0
    handed_off: int = 0
    failed: int = 0
    tool_calls: int = 0
    duplicate_side_effects: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Provider:
    """The world's ground truth: effects that landed, per (task, step)."""

    landed: Counter[tuple[str, str]] = field(default_factory=Counter)
    calls: int = 0

    def duplicates(self) -> int:
        return sum(n - 1 for n in self.landed.values() if n > 1)


def run_unkeyed(
    wiring: str, *, tasks: int = 200, seed: int = 7, faults: Faults = Faults()
) -> UnkeyedResult:
    """Run ``tasks`` seeded multi-step tasks under one wiring; the same seed, the same faults."""
    if wiring not in WIRINGS:
        raise ValueError(f"unknown wiring {wiring!r}: choose one of {', '.join(WIRINGS)}")
    provider = Provider()
    result = UnkeyedResult(wiring=wiring, tasks=tasks)
    governor = _governor(seed) if wiring != "naive" else None
    for n in range(tasks):
        task_id = f"ms-{seed}-{n}"
        rng = random.Random(f"{seed}:{n}")
        tools = _Tools(task_id, provider, rng, faults)
        try:
            if governor is None:
                _naive(tools, faults.steps)
            else:
                _governed(governor, tools, faults.steps, verified=wiring == "verified")
        except TaskStopped as stopped:
            if stopped.verdict.decision.value == "handoff_human":
                result.handed_off += 1
            else:
                result.failed += 1
            continue
        except Exception:  # noqa: BLE001 - a naive loop that ran out of retries
            result.failed += 1
            continue
        result.succeeded += 1
    result.tool_calls = provider.calls
    result.duplicate_side_effects = provider.duplicates()
    return result


class _Tools:
    """One task's tools over the shared provider; faults drawn from the task's own rng."""

    def __init__(
        self, task_id: str, provider: Provider, rng: random.Random, faults: Faults
    ) -> None:
        self.task_id, self.provider, self.rng, self.faults = task_id, provider, rng, faults

    def read(self, step: str) -> str:
        self.provider.calls += 1
        draw = self.rng.random()
        if draw < self.faults.read_timeout:
            raise TimeoutError(f"{step} timed out")
        if draw < self.faults.read_timeout + self.faults.read_reset:
            raise ConnectionResetError(f"{step}: connection reset by peer")
        return f"{step}:ok"

    def write(self, step: str) -> str:
        self.provider.calls += 1
        draw = self.rng.random()
        if draw < self.faults.write_before:
            # refused: nothing was sent (a reset could come after the server acted, so the
            # governor reads a reset as ambiguous: sdk/core/ambiguity.py)
            raise ConnectionRefusedError(f"{step}: connection refused, the request was not sent")
        self.provider.landed[(self.task_id, step)] += 1
        if draw < self.faults.write_before + self.faults.write_after:
            raise TimeoutError(f"{step}: timed out waiting for the answer (it landed)")
        return f"{step}:done"

    def landed(self, step: str) -> bool:
        return self.provider.landed[(self.task_id, step)] > 0


def _naive(tools: _Tools, steps: tuple[str, ...], retries: int = 3) -> None:
    for i, step in enumerate(steps):
        call = tools.read if step == "lookup" else tools.write
        for attempt in range(retries + 1):
            try:
                call(f"{step}-{i}")
                break
            except Exception:
                if attempt == retries:
                    raise


def _governed(governor: Governor, tools: _Tools, steps: tuple[str, ...], *, verified: bool) -> None:
    """The plain wiring: decorate the tools, call the task. ``verified`` adds ``verify=``."""
    read = governor.tool("lookup")(tools.read)
    writes: dict[str, Callable[..., Any]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the plain wiring is the one the warning is about
        for step in set(steps) - {"lookup"}:
            options = {"verify": tools.landed} if verified else {}
            writes[step] = governor.side_effect(step, **options)(tools.write)

    def task() -> None:
        for i, step in enumerate(steps):
            (read if step == "lookup" else writes[step])(f"{step}-{i}")

    governor.call(
        task, goal=f"multi-step task {tools.task_id}", agent="unkeyed-tools", task_id=tools.task_id
    )


def _governor(seed: int) -> Governor:
    policy = RetryPolicy(
        id="unkeyed-tools", version="1", backoff=BackoffPolicy(base_ms=100, cap_ms=2_000)
    )
    return Governor.with_virtual_time(
        policy,
        start=_START,
        rng=random.Random(seed),
        handoff=CallbackChannel(lambda package: None),
        validate_events=False,
    )
