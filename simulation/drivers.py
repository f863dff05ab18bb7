"""Two ways to run the same seeded task: naively, and under the real governor.

The naive driver is what agents commonly do: retry the whole task up to three times after
a short pause, appending the failed attempt's output and error (and, through the "save
then re-read history" bug, the user message again) to the context, with no idempotency
keys and no memory of finished steps. The governed driver drives
:class:`retrylens.sdk.core.governor.TaskRun` — the SDK's real decision code — on a virtual
clock. Both face the same :class:`~retrylens.simulation.world.World`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from retrylens.errors import HandedOff, TaskStopped
from retrylens.schemas import (
    AgentRef,
    Decision,
    EventKind,
    RetryEvent,
    SideEffect,
    SideEffectStatus,
    TaskOutcome,
)
from retrylens.sdk.core.events import EventFactory, hex_id
from retrylens.sdk.core.governor import Governor, TaskRun, VirtualClock
from retrylens.sdk.core.policy import RetryPolicy
from retrylens.sdk.core.side_effects import idempotency_key
from retrylens.sdk.core.state import TaskState
from retrylens.sdk.text.context import (
    ContextBuilder,
    Message,
    estimate_tokens,
    pollution_score,
    snapshot,
)
from retrylens.sdk.text.features import extract_input_features, input_fingerprint
from retrylens.sdk.text.sanitizer import Failure

from .scenario import Step
from .tasks import SimTask
from .world import CallResult, SimFault, World

SYSTEM_PROMPT = "You are a careful agent. Use the tools listed; answer in the requested JSON format."


@dataclass
class AttemptTruth:
    """One attempt as the simulation ran it: what it was told to record, and what the governor
    answered (its decision and backoff), for the ground truth of the metrics."""

    number: int
    failed: bool
    latency_ms: int
    cost_usd: float
    tokens: int
    error_type: str = ""
    decision: str = ""
    backoff_ms: int = 0


@dataclass
class Tally:
    """What one task cost and how it ended, for the fleet's totals."""

    project: str = ""
    agent: str = ""
    task_id: str = ""
    log: list[AttemptTruth] = field(default_factory=list)
    attempts: int = 0
    failed_retries: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    outcome: TaskOutcome = TaskOutcome.FAILED
    handed_off: bool = False
    failure_phases: list[str] = field(default_factory=list)
    looped: bool = False

    def failed(self, phase: str, attempt: int) -> None:
        self.failure_phases.append(phase)
        if attempt > 1:
            self.failed_retries += 1
        if len(self.failure_phases) >= 3 and len(set(self.failure_phases[-3:])) == 1:
            self.looped = True

    def ran(self, number: int, call: CallResult, latency_ms: int, error_type: str = "") -> AttemptTruth:
        """Record attempt ``number`` as passed to the recorder (failed when ``error_type`` is set)."""
        attempt = AttemptTruth(number, bool(error_type), int(latency_ms), round(call.cost_usd, 8),
                               call.tokens_in + call.tokens_out, error_type)
        self.log.append(attempt)
        return attempt

    @property
    def succeeded(self) -> bool:
        return bool(self.log) and not self.log[-1].failed

    def spend(self, call: CallResult) -> None:
        self.tokens += call.tokens_in + call.tokens_out
        self.cost_usd += call.cost_usd


def _add(total: CallResult, call: CallResult | None) -> None:
    if call is not None:
        total.tokens_in += call.tokens_in
        total.tokens_out += call.tokens_out
        total.cost_usd += call.cost_usd
        total.latency_ms += call.latency_ms


def _features(task: SimTask) -> dict[str, object]:
    t = task.template
    return extract_input_features(task.text, agent=t.agent, model=t.model, tools=t.tools)


# -- governed ------------------------------------------------------------------------------
class GovernedDriver:
    def __init__(self, world: World, governor: Governor, clock: VirtualClock, *, compact: bool = False) -> None:
        self.world = world
        self.g = governor
        self.clock = clock
        self.compact = compact

    def run(self, task: SimTask, rng: random.Random) -> Tally:
        t = task.template
        tally = Tally(project=t.project, agent=t.agent, task_id=task.task_id)
        self.clock.set(task.start_s)
        first = t.steps[0]
        run = self.g.start(task.text, agent=AgentRef(name=t.agent, role=t.role), task_id=task.task_id,
                           phase=first.phase, dependency=t.model if first.dependency == "model" else first.dependency,
                           system=SYSTEM_PROMPT, features=_features(task), compact=self.compact)
        try:
            with run:
                self._loop(run, task, rng, tally)
        except HandedOff:
            tally.handed_off = True
        except TaskStopped:
            pass
        tally.outcome = run.outcome or TaskOutcome.FAILED
        return tally

    def _loop(self, run: TaskRun, task: SimTask, rng: random.Random, tally: Tally) -> None:
        steps = task.template.steps
        while True:
            start = next(i for i, step in enumerate(steps) if not run.step_done(step.name))
            step = steps[start]
            attempt = run.begin(phase=step.phase, dependency=task.template.model if step.dependency == "model"
                                else step.dependency)
            tally.attempts += 1
            messages = attempt.messages
            pollution = pollution_score(messages)
            tokens = int(estimate_tokens(messages) * attempt.scope)
            spent = CallResult()
            try:
                for step in steps[start:]:
                    _add(spent, self._step(run, task, step, rng, tokens=tokens, pollution=pollution))
                    run.complete_step(step.name, f"{step.name}:ok", fact=f"{step.name} completed")
            except SimFault as fault:
                self.clock.advance(fault.latency_ms / 1000)
                _add(spent, fault.call)
                tally.spend(spent)
                tally.failed(fault.phase, attempt.number)
                failure = Failure(fault.error_type, fault.message, status=fault.status,
                                  retry_after_ms=fault.retry_after_ms, missing_field=fault.missing_field)
                truth = tally.ran(attempt.number, spent, spent.latency_ms + fault.latency_ms, str(fault.error_type))
                try:
                    verdict = run.fail(attempt, failure, tokens_in=spent.tokens_in, tokens_out=spent.tokens_out,
                                       cost_usd=round(spent.cost_usd, 8),
                                       latency_ms=spent.latency_ms + fault.latency_ms,
                                       phase=fault.phase, dependency=fault.dependency)
                except TaskStopped as stopped:
                    truth.decision, truth.backoff_ms = stopped.verdict.decision.value, stopped.verdict.backoff_ms
                    raise
                truth.decision, truth.backoff_ms = verdict.decision.value, verdict.backoff_ms
                run.wait(verdict)
                continue
            tally.spend(spent)
            tally.ran(attempt.number, spent, spent.latency_ms)
            run.succeed(attempt, tokens_in=spent.tokens_in, tokens_out=spent.tokens_out,
                        cost_usd=round(spent.cost_usd, 8), latency_ms=spent.latency_ms)
            return

    def _step(self, run: TaskRun, task: SimTask, step: Step, rng: random.Random, *, tokens: int,
              pollution: float) -> CallResult:
        world, now = self.world, self.clock
        if step.dependency == "model":
            model = run.route(task.template.model)
            call = world.model_call(task, step, model, tokens_in=tokens, pollution=pollution,
                                    patched=bool(run.state.patch), relaxed=run.state.relaxed,
                                    summarised=bool(run.state.failure_summary), now_s=now(), rng=rng)
            dependency = model
        elif step.side_effect:
            spec = world.scenario.side_effects[step.side_effect]
            key = idempotency_key(task.task_id, step.name, {"args": (), "kwargs": {}})

            def effect(*, idempotency_key: str) -> dict[str, int]:
                result = world.side_effect(task, step, spec, now_s=now(), rng=rng, key=idempotency_key)
                return {"latency_ms": result.latency_ms}

            outcome = run.side_effect(step.dependency, effect, step=step.name, key=key,
                                      rollback=lambda *a, **k: world.providers.rollback_rows(key))
            call = CallResult(latency_ms=int(outcome.get("latency_ms", 0)) if isinstance(outcome, dict) else 0)
            dependency = step.dependency
        else:
            call = world.tool_call(task, step, pollution=pollution, now_s=now(), rng=rng)
            dependency = step.dependency
        run.observe(dependency, True)
        self.clock.advance(call.latency_ms / 1000)
        return call


# -- naive ---------------------------------------------------------------------------------
class NaiveDriver:
    """Retry the whole task ``retries`` times, appending the full history; no idempotency."""

    POLICY = RetryPolicy(id="naive", version="retry3-full-history")

    def __init__(self, world: World, events: EventFactory, emit: Callable[[RetryEvent], object],
                 clock: VirtualClock, rng: random.Random) -> None:
        self.world = world
        self.events = events
        self.emit = emit
        self.clock = clock
        self.ids = rng
        self.retries = world.scenario.naive.retries
        self.delay_s = world.scenario.naive.delay_ms / 1000

    def run(self, task: SimTask, rng: random.Random) -> Tally:
        t = task.template
        self.clock.set(task.start_s)
        tally = Tally(project=t.project, agent=t.agent, task_id=task.task_id)
        state = TaskState(
            task_id=task.task_id, project=t.project, agent=AgentRef(name=t.agent, role=t.role), goal=task.text,
            fingerprint=input_fingerprint(task.text), features=_features(task), trace_id=hex_id(self.ids, 128),
            root_span_id=hex_id(self.ids, 64), policy=self.POLICY, phase=t.steps[0].phase, dependency=t.model,
        )
        self.events.project = t.project
        self._emit(state, EventKind.TASK_STARTED, None, input_features=state.features)
        history: list[Message] = ContextBuilder.for_input(task.text, system=SYSTEM_PROMPT).build()
        for number in range(1, self.retries + 2):
            state.attempt = number
            span = hex_id(self.ids, 64)
            state.phase, state.dependency = t.steps[0].phase, t.model
            self._emit(state, EventKind.ATTEMPT_STARTED, span)
            tally.attempts += 1
            spent = CallResult()
            try:
                self._attempt(task, history, rng, state, span, spent)
            except SimFault as fault:
                self.clock.advance(fault.latency_ms / 1000)
                _add(spent, fault.call)
                tally.spend(spent)
                tally.failed(fault.phase, number)
                state.phase, state.dependency = fault.phase, fault.dependency
                failure = Failure(fault.error_type, fault.message, status=fault.status)
                self._emit(state, EventKind.ATTEMPT_FAILED, span, error_type=fault.error_type, retryable=True,
                           error_detail=failure.detail(), latency_ms=spent.latency_ms + fault.latency_ms,
                           tokens_in=spent.tokens_in, tokens_out=spent.tokens_out, cost_usd=round(spent.cost_usd, 8),
                           context_snapshot=snapshot(history))
                retry = number <= self.retries
                truth = tally.ran(number, spent, spent.latency_ms + fault.latency_ms, str(fault.error_type))
                truth.decision = (Decision.RETRY_SAME if retry else Decision.GIVE_UP).value
                truth.backoff_ms = int(self.delay_s * 1000) if retry else 0
                self._emit(state, EventKind.DECISION, span, error_type=fault.error_type,
                           decision=Decision.RETRY_SAME if retry else Decision.GIVE_UP,
                           decision_reason=f"naive: retry {number}/{self.retries} with the full history" if retry
                           else f"naive: {self.retries} retries used", backoff_ms=int(self.delay_s * 1000) if retry else 0)
                if fault.raw_output:
                    history.append({"role": "assistant", "content": fault.raw_output})
                history.append({"role": "tool", "content": f"Error: {fault.message}", "error": True})
                history.append({"role": "user", "content": task.text})  # the echoed-history bug
                if retry:
                    self.clock.advance(self.delay_s)
                continue
            tally.spend(spent)
            tally.ran(number, spent, spent.latency_ms)
            self._emit(state, EventKind.ATTEMPT_SUCCEEDED, span, tokens_in=spent.tokens_in, tokens_out=spent.tokens_out,
                       cost_usd=round(spent.cost_usd, 8), latency_ms=spent.latency_ms)
            tally.outcome = TaskOutcome.SUCCEEDED
            break
        self._emit(state, EventKind.TASK_FINISHED, None, outcome=tally.outcome)
        return tally

    def _attempt(self, task: SimTask, history: list[Message], rng: random.Random, state: TaskState,
                 span: str, spent: CallResult) -> None:
        world = self.world
        pollution = pollution_score(history)
        tokens = estimate_tokens(history)
        for step in task.template.steps:
            if step.dependency == "model":
                call = world.model_call(task, step, task.template.model, tokens_in=tokens, pollution=pollution,
                                        patched=False, relaxed=False, summarised=False, now_s=self.clock(), rng=rng)
            elif step.side_effect:
                spec = world.scenario.side_effects[step.side_effect]
                call = world.side_effect(task, step, spec, now_s=self.clock(), rng=rng, key=None)
                effect = SideEffect(tool=step.dependency, idempotency_key=f"unkeyed:{hex_id(self.ids, 64)}",
                                    status=SideEffectStatus.COMMITTED)
                self._emit(state, EventKind.SIDE_EFFECT, span, side_effects=[effect])
            else:
                call = world.tool_call(task, step, pollution=pollution, now_s=self.clock(), rng=rng)
            self.clock.advance(call.latency_ms / 1000)
            _add(spent, call)

    def _emit(self, state: TaskState, kind: EventKind, span: str | None, **fields: object) -> None:
        correlation = f"{state.task_id}:{state.attempt}"
        self.emit(self.events.make(state, kind, correlation_id=correlation, span_id=span or state.root_span_id,
                                   **fields))
