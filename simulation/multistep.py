"""Multi-step tasks with seeded faults at the tool boundary, run three ways (issue 24).

Why: the fleet simulation's tasks re-run as a whole, so it cannot show what a task budget
does to a *long* task — one that makes 2-20 tool calls, each of which may time out or be
rate limited. This module runs such tasks through the real governor and through the
loop agents commonly write, on the same faults, and counts what each finished and what
each asked of the tools.

The tool boundary (:class:`ToolBoundary`): task ``t`` is ``steps`` calls; the ``n``-th
try of call ``i`` meets a fault drawn from ``(seed, t, i, n)`` only, so every wiring meets
the same fault on the same try of the same call. Faults, each ``fault_rate / 3``:

* ``before``: a timeout before the tool ran (nothing happened);
* ``after``: the tool ran, then a timeout (the effect happened; the caller cannot know);
* ``429``: rate limited before the tool ran.

``blip=True`` replaces the draw: the first try of every call times out before the tool
ran and every later try succeeds — "every step fails once", the long task with one blip
per step that a budget or a backoff counted across the whole task would stop (issue 35).

Wirings (:data:`WIRINGS`):

* ``naive``: each call retried up to 3 tries on any exception; the task fails when a
  call fails three times (what agents do);
* ``governed_steps``: ``governor.step`` per call inside ``governor.call`` — retried in
  place under the task's rules and budget; each call is a side effect whose ``verify``
  asks "did the tool run since this try began" (a read, counted apart from requests);
* ``governed_plain``: ``governor.call`` around the whole task: a failure re-runs it all.

Every governed task gets its own governor (on virtual time, seeded), so fleet-level
protection (the retry throttle, breakers) never binds: what is measured is the task's
budget. To reuse the boundary for another question — e.g. tools that take no
idempotency key and no ``verify`` — write a wiring ``(ToolBoundary, RetryPolicy) ->
Finished`` and pass it to :func:`run_cell` in ``wirings``; :attr:`ToolBoundary.duplicates`
counts extra executions of a call's effect.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from retrylens.errors import TaskStopped
from retrylens.sdk.core.budget import stopping_budget
from retrylens.sdk.core.governor import Governor
from retrylens.sdk.core.policy import RetryPolicy

FAULT_KINDS = ("before", "after", "429")
START = datetime(2026, 1, 1, tzinfo=UTC)
NAIVE_TRIES = 3


class RateLimited(Exception):
    """A 429 from the tool's backend (classified as ``rate_limit`` by its status)."""

    status_code = 429


@dataclass
class ToolBoundary:
    """One task's tools with seeded faults; counts tries, executions and verify reads."""

    seed: int
    task: int
    steps: int
    fault_rate: float
    blip: bool = False
    tries: dict[int, int] = field(default_factory=dict)
    ran: dict[int, int] = field(default_factory=dict)
    verify_reads: int = 0
    _ran_before: dict[int, int] = field(default_factory=dict)

    def fault(self, i: int, n: int) -> str | None:
        """The fault the ``n``-th try (0-based) of call ``i`` meets, or ``None``."""
        if self.blip:
            return "before" if n == 0 else None
        draw = random.Random(f"{self.seed}:{self.task}:{i}:{n}").random()
        share = self.fault_rate / len(FAULT_KINDS)
        index = int(draw // share) if share > 0 else len(FAULT_KINDS)
        return FAULT_KINDS[index] if index < len(FAULT_KINDS) else None

    def call(self, i: int) -> str:
        """Call ``i`` of the task: raises the fault its try meets, else returns a result."""
        n = self.tries.get(i, 0)
        self.tries[i] = n + 1
        self._ran_before[i] = self.ran.get(i, 0)
        kind = self.fault(i, n)
        if kind == "before":
            raise TimeoutError(f"call {i}: the tool timed out before it ran")
        if kind == "429":
            raise RateLimited(f"call {i}: rate limited")
        self.ran[i] = self.ran.get(i, 0) + 1
        if kind == "after":
            raise TimeoutError(f"call {i}: no answer in time (the tool ran)")
        return f"result {i}"

    def happened(self, i: int) -> bool:
        """``verify`` for call ``i``: did the tool run since its last try began?"""
        self.verify_reads += 1
        return self.ran.get(i, 0) > self._ran_before.get(i, 0)

    @property
    def requests(self) -> int:
        """Tool calls made (tries), whatever their outcome."""
        return sum(self.tries.values())

    @property
    def duplicates(self) -> int:
        """Extra executions of a call's effect (every call changes state here)."""
        return sum(max(0, n - 1) for n in self.ran.values())


@dataclass(frozen=True)
class Finished:
    """How one task ended under a wiring: finished, or the reason it was stopped."""

    finished: bool
    reason: str = ""
    slept_s: float = 0.0  # the backoff the governor waited (virtual time; naive waits none)


Wiring = Callable[[ToolBoundary, RetryPolicy], Finished]
Emit = Callable[[Any], object]


def run_naive(tools: ToolBoundary, policy: RetryPolicy) -> Finished:
    """Each call retried up to :data:`NAIVE_TRIES` tries on any exception (``policy`` unused)."""
    for i in range(tools.steps):
        for attempt in range(NAIVE_TRIES):
            try:
                tools.call(i)
                break
            except Exception as exc:  # noqa: BLE001 - the naive loop retries anything
                if attempt == NAIVE_TRIES - 1:
                    return Finished(False, f"naive: call {i} failed {NAIVE_TRIES} times ({exc})")
    return Finished(True)


def _governor(tools: ToolBoundary, policy: RetryPolicy, emit: Emit | None) -> Governor:
    return Governor.with_virtual_time(
        policy, start=START, rng=random.Random(f"{tools.seed}:{tools.task}"), emit=emit
    )


def run_governed_steps(
    tools: ToolBoundary, policy: RetryPolicy, *, emit: Emit | None = None
) -> Finished:
    """``governor.step`` per call, each a side effect with ``verify``, inside ``governor.call``.

    ``emit`` receives the governor's events (for a replay of the log), else they are dropped.
    """
    gov = _governor(tools, policy, emit)

    def agent() -> None:
        for i in range(tools.steps):
            gov.step(
                f"call-{i}",
                tools.call,
                i,
                side_effect=True,
                verify=lambda i=i: tools.happened(i),
                dependency="tools",
            )

    return _governed(gov, agent, tools)


def run_governed_plain(
    tools: ToolBoundary, policy: RetryPolicy, *, emit: Emit | None = None
) -> Finished:
    """``governor.call`` around the whole task: a failed call re-runs every call."""
    gov = _governor(tools, policy, emit)

    def agent() -> None:
        for i in range(tools.steps):
            tools.call(i)

    return _governed(gov, agent, tools)


def _governed(gov: Governor, agent: Callable[[], None], tools: ToolBoundary) -> Finished:
    try:
        gov.call(agent, goal=f"multi-step task {tools.task}", agent="multistep", dependency="tools")
    except TaskStopped as stopped:
        return Finished(False, stopped.verdict.reason, gov.clock())
    return Finished(True, slept_s=gov.clock())


WIRINGS: dict[str, Wiring] = {
    "naive": run_naive,
    "governed_steps": run_governed_steps,
    "governed_plain": run_governed_plain,
}


@dataclass
class CellTally:
    """What one wiring did over the tasks of one (steps, fault rate) cell."""

    tasks: int = 0
    finished: int = 0
    requests: int = 0
    verify_reads: int = 0
    duplicates: int = 0
    slept_s: float = 0.0
    stopped_by: Counter[str] = field(default_factory=Counter)

    def add(self, tools: ToolBoundary, outcome: Finished) -> None:
        self.tasks += 1
        self.slept_s += outcome.slept_s
        self.finished += outcome.finished
        self.requests += tools.requests
        self.verify_reads += tools.verify_reads
        self.duplicates += tools.duplicates
        if not outcome.finished:
            self.stopped_by[stopping_budget(outcome.reason) or _other(outcome.reason)] += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "finished": self.finished,
            "requests_per_task": round(self.requests / self.tasks, 4) if self.tasks else 0.0,
            "verify_reads_per_task": round(self.verify_reads / self.tasks, 4)
            if self.tasks
            else 0.0,
            "duplicates": self.duplicates,
            "slept_s_per_task": round(self.slept_s / self.tasks, 3) if self.tasks else 0.0,
            "stopped_by": dict(sorted(self.stopped_by.items())),
        }


def _other(reason: str) -> str:
    return "naive" if reason.startswith("naive:") else reason.split(":")[0][:40] or "other"


def run_cell(
    steps: int,
    fault_rate: float,
    *,
    tasks: int,
    seed: int = 0,
    policy: RetryPolicy | None = None,
    wirings: Mapping[str, Wiring] = WIRINGS,
    blip: bool = False,
) -> dict[str, CellTally]:
    """``tasks`` tasks of ``steps`` calls at ``fault_rate`` (or with one blip per call),
    under each wiring, same faults."""
    policy = policy or RetryPolicy()
    tallies = {name: CellTally() for name in wirings}
    for t in range(tasks):
        for name, wiring in wirings.items():
            tools = ToolBoundary(seed, t, steps, fault_rate, blip=blip)
            tallies[name].add(tools, wiring(tools, policy))
    return tallies


def run_grid(
    steps: Iterable[int],
    fault_rates: Iterable[float],
    *,
    tasks: int,
    seed: int = 0,
    policy: RetryPolicy | None = None,
    wirings: Mapping[str, Wiring] = WIRINGS,
    blips: bool = False,
) -> list[dict[str, Any]]:
    """One row per (steps, fault rate) cell: each wiring's :meth:`CellTally.to_dict`;
    ``blips=True`` adds a row per step count where every call fails once (``fault_rate``
    ``None``)."""
    rates: list[float | None] = list(fault_rates)
    if blips:
        rates.append(None)
    rows = []
    for n in steps:
        for rate in rates:
            cell = run_cell(
                n,
                rate or 0.0,
                tasks=1 if rate is None else tasks,  # a blip task has no draw: one is all
                seed=seed,
                policy=policy,
                wirings=wirings,
                blip=rate is None,
            )
            rows.append(
                {"steps": n, "fault_rate": rate, **{k: v.to_dict() for k, v in cell.items()}}
            )
    return rows
