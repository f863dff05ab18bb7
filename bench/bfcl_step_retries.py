"""Step-level retries on a real benchmark's stateful tools (BFCL multi-turn), vs a naive loop.

Why: the simulated fleet's tools honour idempotency keys and its tasks are one step, so it
cannot show what happens when a multi-step task meets faults at the tool boundary. The
Berkeley Function Calling Leaderboard (``bfcl-eval`` on PyPI) ships real stateful tool
classes (file system, trading, travel, messaging, tickets, vehicle, posting) that take no
idempotency keys, and a ground-truth call sequence per task. Each task's sequence is run
as the agent, with seeded faults injected at the tool boundary:

* ``before``: a timeout before the tool runs (nothing happened),
* ``after``: the tool ran, then a timeout (the effect happened; the caller cannot know),
* ``429``: rate limited before the tool runs.

The faults are drawn per (seed, task, call, execution number), so every driver meets the
same faults on the n-th execution of the same call. A task is *correct* when it finished
and the tools' resulting state equals a fault-free run's. A *duplicated side effect* is an
extra execution of a call that changes state. Drivers:

* ``naive``: each tool call retried up to 3 times on any exception (what agents do);
* ``governed``: ``governor.step`` per call (retried in place under the task's rules), each
  call declared a side effect with ``verify`` = "did the tools' state change since this
  call began" (a generic check an agent can make by reading the environment);
* ``governed_noverify``: the same without ``verify`` (tools take no key: a blind repeat).

Usage: ``python bench/bfcl_step_retries.py [--seeds 5] [--limit 200] [--json]``. Needs
``bfcl-eval`` importable; its install drags torch (sentence-transformers), so install it
with ``--no-deps`` plus ``mpmath`` (the tool classes are pure Python).
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from typing import Any

FAULT_RATES = {"before": 0.05, "after": 0.05, "429": 0.05}
STATELESS = {"MathAPI"}
START = datetime(2025, 1, 1, tzinfo=UTC)


class RateLimited(Exception):
    status_code = 429


@dataclass
class Task:
    id: str
    classes: list[str]
    config: dict[str, Any]
    calls: list[str]


@dataclass
class Outcome:
    finished: bool
    correct: bool
    duplicates: int
    executions: int


def load_tasks(limit: int | None = None) -> list[Task]:
    data = resources.files("bfcl_eval") / "data"
    questions = [
        json.loads(line)
        for line in (data / "BFCL_v4_multi_turn_base.json").read_text().splitlines()
        if line.strip()
    ]
    answers = {
        a["id"]: a["ground_truth"]
        for a in (
            json.loads(line)
            for line in (data / "possible_answer" / "BFCL_v4_multi_turn_base.json")
            .read_text()
            .splitlines()
            if line.strip()
        )
    }
    tasks = [
        Task(q["id"], q["involved_classes"], q["initial_config"], [c for turn in answers[q["id"]] for c in turn])
        for q in questions
        if q["id"] in answers
    ]
    return tasks[:limit] if limit else tasks


def _class(name: str) -> type:
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    return getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name)  # type: ignore[no-any-return]


def _parse(call: str) -> tuple[str, list[Any], dict[str, Any]]:
    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name), call
    return (
        node.func.id,
        [ast.literal_eval(a) for a in node.args],
        {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg},
    )


def _canon(value: Any, seen: frozenset[int] = frozenset()) -> Any:
    """JSON-ready form of tool state (mixed dict keys, sets, objects; back-links cut)."""
    if isinstance(value, dict):
        return {repr(k): _canon(v, seen) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canon(v, seen) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(repr(v) for v in value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if hasattr(value, "__dict__") and not callable(value):
        if id(value) in seen:
            return "<cycle>"  # e.g. a directory's link to its parent
        inner = seen | {id(value)}
        return {"__type__": type(value).__name__, **_canon(vars(value), inner)}
    return type(value).__name__


class World:
    """The task's tool instances, loaded from the task's initial configuration."""

    def __init__(self, task: Task) -> None:
        self.instances: list[Any] = []
        for name in task.classes:
            instance = _class(name)()
            if name not in STATELESS:
                instance._load_scenario(copy.deepcopy(task.config.get(name, {})), long_context=False)
            self.instances.append(instance)

    def state(self) -> str:
        return json.dumps(
            [
                _canon({k: v for k, v in vars(i).items() if not k.startswith("_") and not callable(v)})
                for i in self.instances
            ],
            sort_keys=True,
        )

    def run(self, call: str) -> Any:
        name, args, kwargs = _parse(call)
        for instance in self.instances:
            method = getattr(instance, name, None)
            if callable(method):
                return method(*args, **kwargs)
        raise AttributeError(f"no tool has {name}")


class FaultyTools:
    """The tool boundary with seeded faults; counts how often each call really ran."""

    def __init__(self, world: World, task: Task, seed: int) -> None:
        self.world, self.task, self.seed = world, task, seed
        self.tries: dict[int, int] = {}
        self.ran: dict[int, int] = {}
        self.before: dict[int, str] = {}

    def fault(self, i: int, n: int) -> str | None:
        rng = random.Random(f"{self.seed}:{self.task.id}:{i}:{n}")
        draw = rng.random()
        edge = 0.0
        for kind, rate in FAULT_RATES.items():
            edge += rate
            if draw < edge:
                return kind
        return None

    def call(self, i: int) -> Any:
        n = self.tries.get(i, 0)
        self.tries[i] = n + 1
        self.before[i] = self.world.state()
        kind = self.fault(i, n)
        if kind == "before":
            raise TimeoutError(f"{self.task.calls[i]}: tool timed out before it ran")
        if kind == "429":
            raise RateLimited(f"{self.task.calls[i]}: rate limited")
        result = self.world.run(self.task.calls[i])
        self.ran[i] = self.ran.get(i, 0) + 1
        if kind == "after":
            raise TimeoutError(f"{self.task.calls[i]}: no answer in time (the tool ran)")
        return result

    def happened(self, i: int) -> bool:
        """``verify``: did the tools' state change since this call's last try began?"""
        return self.world.state() != self.before.get(i)


def reference(task: Task) -> tuple[str, set[int]]:
    """The fault-free final state, and which calls change state."""
    world = World(task)
    writes: set[int] = set()
    for i, call in enumerate(task.calls):
        before = world.state()
        world.run(call)
        if world.state() != before:
            writes.add(i)
    return world.state(), writes


def run_naive(tools: FaultyTools) -> bool:
    for i in range(len(tools.task.calls)):
        for attempt in range(3):
            try:
                tools.call(i)
                break
            except Exception:  # noqa: BLE001 - the naive loop retries anything
                if attempt == 2:
                    return False
    return True


def run_governed(tools: FaultyTools, *, verify: bool, seed: int) -> bool:
    from retrylens.errors import TaskStopped
    from retrylens.sdk import Governor
    from retrylens.sdk.core.policy import FleetBudgetPolicy, RetryPolicy, TaskBudget

    policy = RetryPolicy(
        budget=TaskBudget(max_attempts=40),
        fleet_budget=FleetBudgetPolicy(ratio=0.5),
    )
    gov = Governor.with_virtual_time(policy, start=START, rng=random.Random(seed))
    task = tools.task

    def agent() -> None:
        for i in range(len(task.calls)):
            gov.step(
                f"{i}:{task.calls[i][:40]}",
                tools.call,
                i,
                side_effect=True,
                verify=(lambda i=i: tools.happened(i)) if verify else None,
                dependency=task.classes[0],
            )

    try:
        gov.call(agent, goal=f"bfcl {task.id}", agent="bfcl")
    except TaskStopped:
        return False
    return True


DRIVERS: dict[str, Callable[[FaultyTools, int], bool]] = {
    "naive": lambda tools, seed: run_naive(tools),
    "governed": lambda tools, seed: run_governed(tools, verify=True, seed=seed),
    "governed_noverify": lambda tools, seed: run_governed(tools, verify=False, seed=seed),
}


def run_one(task: Task, seed: int, driver: str, ref: tuple[str, set[int]]) -> Outcome:
    final, writes = ref
    world = World(task)
    tools = FaultyTools(world, task, seed)
    try:
        finished = DRIVERS[driver](tools, seed)
    except Exception:  # noqa: BLE001 - a tool error the driver let through: not finished
        finished = False
    duplicates = sum(max(0, tools.ran.get(i, 0) - 1) for i in writes)
    return Outcome(finished, finished and world.state() == final, duplicates, sum(tools.tries.values()))


@dataclass
class Tally:
    runs: int = 0
    correct: int = 0
    finished: int = 0
    duplicates: int = 0
    executions: int = 0
    per_task: list[bool] = field(default_factory=list, repr=False)

    def add(self, o: Outcome) -> None:
        self.runs += 1
        self.correct += o.correct
        self.finished += o.finished
        self.duplicates += o.duplicates
        self.executions += o.executions

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "correct": self.correct,
            "correct_rate": round(self.correct / self.runs, 4) if self.runs else 0.0,
            "finished": self.finished,
            "duplicated_side_effects": self.duplicates,
            "tool_executions": self.executions,
        }


def evaluate(seeds: int, limit: int | None = None, drivers: tuple[str, ...] = tuple(DRIVERS)) -> dict[str, Any]:
    import logging

    logging.getLogger("retrylens").setLevel(logging.ERROR)
    tasks = load_tasks(limit)
    tallies = {d: Tally() for d in drivers}
    skipped = 0
    for task in tasks:
        try:
            ref = reference(task)
        except Exception:  # noqa: BLE001 - a ground truth our parser cannot execute
            skipped += 1
            continue
        for seed in range(seeds):
            for driver in drivers:
                tallies[driver].add(run_one(task, seed, driver, ref))
    return {
        "tasks": len(tasks) - skipped,
        "skipped": skipped,
        "seeds": seeds,
        "fault_rates": FAULT_RATES,
        **{d: t.to_dict() for d, t in tallies.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny size: the test suite's smoke run")
    args = parser.parse_args()
    if args.smoke:
        args.seeds, args.limit = 1, 5
    result = evaluate(args.seeds, args.limit)
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
