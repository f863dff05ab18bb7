"""Run the simulated fleet under one driver and total what it cost.

Metric definitions (identical for both drivers):

- ``success_rate``: tasks that ended ``succeeded`` / tasks.
- ``attempts``: attempts started, all tasks.
- ``wasted_attempts``: retries (attempt ≥ 2) that failed — spend that bought nothing.
- ``duplicate_side_effects``: extra charges and extra CRM rows beyond one per task step,
  counted by the simulated providers (the ground truth, not the agent's belief).
- ``tokens`` / ``cost_usd``: model tokens in + out and their price, failed calls included.
- ``handoffs``: tasks handed to a human with a package.
- ``loops``: tasks in which one phase failed three or more times back to back.

:attr:`FleetResult.truth` is the ground truth of every metric the product shows, from the
drivers' own tallies (:mod:`.truth`), with the metrics' field names.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from retrylens.analytics.definitions import Metrics
from retrylens.schemas import RetryEvent, TaskOutcome
from retrylens.sdk.core.events import EventFactory
from retrylens.sdk.core.governor import Governor, VirtualClock
from retrylens.sdk.core.history import FailureHistory
from retrylens.sdk.core.policy import RetryPolicy, parse_policy
from retrylens.sdk.core.side_effects import MemoryKeyStore
from retrylens.sdk.transport.handoff import CallbackChannel

from .drivers import GovernedDriver, NaiveDriver, Tally
from .scenario import Scenario
from .tasks import generate_tasks
from .truth import truth_by, truth_of
from .world import World

Driver = Literal["governor", "naive"]


@dataclass
class FleetResult:
    driver: str
    scenario: str
    seed: int
    tasks: int
    succeeded: int
    attempts: int
    wasted_attempts: int
    duplicate_side_effects: int
    tokens: int
    cost_usd: float
    handoffs: int
    loops: int
    events_emitted: int
    policy_id: str
    policy_version: str
    #: Per task, what the driver ran (the ground truth's source; not part of :meth:`to_dict`).
    tallies: list[Tally] = field(default_factory=list, repr=False, compare=False)

    @property
    def success_rate(self) -> float:
        return round(self.succeeded / self.tasks, 4) if self.tasks else 0.0

    @property
    def truth(self) -> Metrics:
        """Every metric of this run, from the tallies (what ``metrics_summary`` must read back)."""
        return truth_of(self.tallies)

    def truth_by(self, dimension: str, *, project: str | None = None) -> dict[str, Metrics]:
        """The truth per ``project`` or ``agent`` (of ``project`` only, when given): what
        ``metrics_by`` must read back."""
        return truth_by(self.tallies, dimension, project=project)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "tallies"}
        data["success_rate"] = self.success_rate
        data["cost_usd"] = round(self.cost_usd, 4)
        return data


def fleet_policy(scenario: Scenario) -> RetryPolicy:
    """The governor's policy: the scenario's ``policy`` plus its shadow settings and fallbacks."""
    data = dict(scenario.policy)
    data.setdefault("fallbacks", scenario.fallbacks())
    data["shadow"] = scenario.shadow.model_dump()
    return parse_policy(data, source=f"scenario {scenario.name}: policy")


def run_fleet(
    scenario: Scenario,
    *,
    tasks: int,
    seed: int,
    driver: Driver = "governor",
    emit: Callable[[RetryEvent], object] | None = None,
    start: datetime | None = None,
    validate_events: bool = True,
    compact: bool = False,
    task_range: range | None = None,
    preflight: Callable[[str], Any] | None = None,
    on_task: Callable[[Tally], object] | None = None,
) -> FleetResult:
    """Run ``tasks`` seeded tasks of ``scenario`` under ``driver``; events go to ``emit``.

    Deterministic for a given (scenario, tasks, seed, driver, start): virtual time, ids
    from seeded generators, no real sleeps. ``start`` defaults to now minus the span, so
    the events end about now. ``compact``: the governor records clean first-try successes
    in the compact form (one event).

    ``task_range`` runs only those tasks of the seeded list (the rest of the fleet keeps its
    timeline, so a later range happens later); ``preflight(project)`` gives each project's
    governor a pre-flight client (the demo's API-path risk checks); ``on_task`` sees each
    task's tally as it ends (progress bars).
    """
    if driver not in ("governor", "naive"):
        raise ValueError(f"driver must be 'governor' or 'naive', not {driver!r}")
    span = timedelta(hours=scenario.span_hours)
    start = start or (datetime.now(UTC).replace(microsecond=0) - span)
    emitted = 0

    def count_and_emit(event: RetryEvent) -> None:
        nonlocal emitted
        emitted += 1
        if emit is not None:
            emit(event)

    clock = VirtualClock()
    world = World(scenario)
    # A later range draws its ids from a stream of its own, so they never repeat the first part's.
    part = f":from{task_range.start}" if task_range is not None and task_range.start else ""
    id_rng = random.Random(f"{seed}:ids:{driver}{part}")
    policy = fleet_policy(scenario)
    handoffs: list[object] = []
    if driver == "naive":
        events = EventFactory(
            project="naive",
            wall=lambda: start + timedelta(seconds=clock()),
            rng=id_rng,
            validate=validate_events,
        )
        runner: Any = NaiveDriver(world, events, count_and_emit, clock, id_rng)
        policy = NaiveDriver.POLICY
    else:
        runner = _GovernedFleet(
            world,
            policy,
            clock,
            start,
            id_rng,
            count_and_emit,
            handoffs.append,
            validate_events,
            compact,
            preflight,
            seed=seed,
        )
    tallies: list[Tally] = []
    fleet = generate_tasks(scenario, tasks, seed)
    for task in fleet if task_range is None else [fleet[i] for i in task_range]:
        tally = runner.run(task, random.Random(f"{seed}:faults:{task.index}"))
        tallies.append(tally)
        if on_task is not None:
            on_task(tally)
    return FleetResult(
        driver=driver,
        scenario=scenario.name,
        seed=seed,
        tasks=len(tallies),
        succeeded=sum(t.outcome is TaskOutcome.SUCCEEDED for t in tallies),
        attempts=sum(t.attempts for t in tallies),
        wasted_attempts=sum(t.failed_retries for t in tallies),
        duplicate_side_effects=world.providers.duplicates(),
        tokens=sum(t.tokens for t in tallies),
        cost_usd=sum(t.cost_usd for t in tallies),
        handoffs=sum(t.handed_off for t in tallies),
        loops=sum(t.looped for t in tallies),
        events_emitted=emitted,
        policy_id=policy.id,
        policy_version=policy.version,
        tallies=tallies,
    )


class _GovernedFleet:
    """One real :class:`Governor` per project (each a deployment), sharing the virtual clock.

    The governors' random stream (backoff jitter, shadow exploration, ids) is re-seeded from
    the task before each task runs, as the world's faults are: a task's draws are its own.
    With one stream for the whole fleet, a task that drew less (stopped earlier, or handed
    to a person) shifted every later task's draws, so the demo's A/B — the same tasks with
    and without pre-check advice, paired task by task — changed tasks that got no advice
    and moved its cost figure by chance.
    """

    def __init__(
        self,
        world: World,
        policy: RetryPolicy,
        clock: VirtualClock,
        start: datetime,
        rng: random.Random,
        emit: Callable[[RetryEvent], object],
        on_handoff: Callable[[object], object],
        validate_events: bool,
        compact: bool,
        preflight: Callable[[str], Any] | None = None,
        *,
        seed: int = 0,
    ) -> None:
        self.world, self.policy, self.clock, self.start, self.rng = world, policy, clock, start, rng
        self.seed = seed
        self.compact = compact
        self.preflight = preflight
        self.emit, self.channel, self.validate = emit, CallbackChannel(on_handoff), validate_events
        self.key_store = MemoryKeyStore()
        self.drivers: dict[str, GovernedDriver] = {}

    def run(self, task: Any, rng: random.Random) -> Tally:
        project = task.template.project
        driver = self.drivers.get(project)
        if driver is None:
            governor = Governor(
                self.policy,
                project=project,
                emit=self.emit,
                clock=self.clock,
                wall=lambda: self.start + timedelta(seconds=self.clock()),
                sleep=self.clock.advance,
                asleep=self.clock.aadvance,
                rng=self.rng,
                key_store=self.key_store,
                handoff=self.channel,
                history=FailureHistory(),
                validate_events=self.validate,
                preflight=self.preflight(project) if self.preflight is not None else None,
            )
            driver = self.drivers[project] = GovernedDriver(
                self.world, governor, self.clock, compact=self.compact
            )
        self.rng.seed(f"{self.seed}:governor:{task.index}")
        return driver.run(task, rng)
