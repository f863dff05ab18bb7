"""The fault model: what happens when a simulated agent calls a model or a tool.

One :class:`World` per fleet run holds the shared state both drivers face: outages (by
virtual time), per-caller rate limits with Retry-After, and the side-effect providers
(a payment processor that honours idempotency keys, a CRM table that does not). All
randomness comes from the caller's ``random.Random`` so that a task's draws are its own.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from retrylens.schemas import ErrorType

from .scenario import Dependency, Scenario, SideEffectSpec, Step
from .tasks import SimTask


class SimFault(Exception):  # noqa: N818 - a simulated failure, raised through agent code
    def __init__(self, error_type: ErrorType, message: str, *, dependency: str, phase: str,
                 retry_after_ms: int | None = None, missing_field: str | None = None, status: int | None = None,
                 raw_output: str = "", latency_ms: int = 0, call: CallResult | None = None) -> None:
        super().__init__(message)
        self.call = call  # what a call that answered (wrongly) still cost
        self.error_type = error_type
        self.message = message
        self.dependency = dependency
        self.phase = phase
        self.retry_after_ms = retry_after_ms
        self.missing_field = missing_field
        self.status = status
        self.raw_output = raw_output
        self.latency_ms = latency_ms


@dataclass
class Providers:
    """Side-effect providers and the ground truth of what happened."""

    charges: Counter[tuple[str, str]] = field(default_factory=Counter)
    payment_keys: dict[str, str] = field(default_factory=dict)
    rows: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    rows_by_key: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)

    def charge(self, task_id: str, step: str, key: str | None) -> str:
        if key is not None and key in self.payment_keys:
            return self.payment_keys[key]
        self.charges[(task_id, step)] += 1
        receipt = f"ch_{task_id}_{step}_{self.charges[(task_id, step)]}"
        if key is not None:
            self.payment_keys[key] = receipt
        return receipt

    def insert_rows(self, task_id: str, step: str, n: int, key: str | None) -> None:
        for row in range(n):
            self.rows[(task_id, step, row)] += 1
            if key is not None:
                self.rows_by_key.setdefault(key, []).append((task_id, step, row))

    def rollback_rows(self, key: str) -> None:
        for row in self.rows_by_key.pop(key, []):
            self.rows[row] -= 1

    def duplicates(self) -> int:
        return sum(c - 1 for c in self.charges.values() if c > 1) + sum(c - 1 for c in self.rows.values() if c > 1)


@dataclass
class CallResult:
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: int = 0


class World:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.span_s = scenario.span_hours * 3600
        self.providers = Providers()
        self._limited_until: dict[tuple[str, str], float] = {}

    def dependency(self, name: str) -> Dependency:
        return self.scenario.dependencies[name]

    def _outage_rate(self, name: str, now_s: float) -> tuple[float, str]:
        for outage in self.scenario.outages:
            start = outage.start * self.span_s
            if outage.dependency == name and start <= now_s < start + outage.duration * self.span_s:
                return outage.rate, outage.error
        return 0.0, ""

    def transient(self, task: SimTask, name: str, phase: str, now_s: float, rng: random.Random) -> None:
        """Raise the dependency's transient faults (rate limits, timeouts, 5xx, network, outages)."""
        dep = self.dependency(name)
        key = (task.task_id, name)
        until = self._limited_until.get(key, -1.0)
        if now_s < until and rng.random() < dep.rate_limited_repeat:
            wait = int((until - now_s) * 1000)
            raise SimFault(ErrorType.RATE_LIMIT, f"429 Too Many Requests from {name}; Retry-After {wait} ms",
                           dependency=name, phase=phase, retry_after_ms=wait, status=429, latency_ms=50)
        rate, error = self._outage_rate(name, now_s)
        if rate and rng.random() < rate:
            raise SimFault(ErrorType(error), f"{error} from {name}: upstream unavailable (outage)", dependency=name,
                           phase=phase, status=503 if error == "server_error" else None, latency_ms=dep.latency_ms)
        draw = rng.random()
        for error_type, p in ((ErrorType.TIMEOUT, dep.timeout), (ErrorType.RATE_LIMIT, dep.rate_limit),
                              (ErrorType.SERVER_ERROR, dep.server_error), (ErrorType.NETWORK, dep.network)):
            if draw < p:
                self._raise_transient(task, name, dep, error_type, phase, now_s, rng)
            draw -= p

    def _raise_transient(self, task: SimTask, name: str, dep: Dependency, error_type: ErrorType, phase: str,
                         now_s: float, rng: random.Random) -> None:
        if error_type is ErrorType.RATE_LIMIT:
            lo, hi = dep.retry_after_ms
            wait = rng.randint(lo, hi)
            self._limited_until[(task.task_id, name)] = now_s + wait / 1000
            raise SimFault(error_type, f"429 Too Many Requests from {name}; Retry-After {wait} ms", dependency=name,
                           phase=phase, retry_after_ms=wait, status=429, latency_ms=50)
        if error_type is ErrorType.TIMEOUT:
            raise SimFault(error_type, f"TimeoutError: {name} did not answer within {dep.timeout_ms} ms",
                           dependency=name, phase=phase, latency_ms=dep.timeout_ms)
        if error_type is ErrorType.SERVER_ERROR:
            raise SimFault(error_type, f"HTTP 503 Service Unavailable from {name}", dependency=name, phase=phase,
                           status=503, latency_ms=dep.latency_ms)
        raise SimFault(error_type, f"ConnectionResetError: connection to {name} reset", dependency=name,
                       phase=phase, latency_ms=dep.latency_ms // 2)

    def model_call(self, task: SimTask, step: Step, model: str, *, tokens_in: int, pollution: float, patched: bool,
                   relaxed: bool, summarised: bool, now_s: float, rng: random.Random) -> CallResult:
        """One model call of ``step``; raises :class:`SimFault` on any failure."""
        dep = self.dependency(model)
        behaviour = self.scenario.model_behaviour
        if tokens_in > dep.context_limit_tokens:
            raise SimFault(ErrorType.CONTEXT_OVERFLOW, f"context length {tokens_in} exceeds {dep.context_limit_tokens}",
                           dependency=model, phase=step.phase, status=400, latency_ms=200)
        self.transient(task, model, step.phase, now_s, rng)
        lo, hi = behaviour.output_tokens
        tokens_out = rng.randint(lo, hi)
        result = CallResult(tokens_in, tokens_out,
                            tokens_in / 1000 * dep.usd_per_1k_in + tokens_out / 1000 * dep.usd_per_1k_out,
                            int(dep.latency_ms * (0.6 + 0.8 * rng.random())))
        weight = self.scenario.pollution.weight * pollution

        def polluted(p: float) -> float:
            p = min(1.0, p / dep.quality)
            return p + (1 - p) * weight

        if step.phase == "planning":
            p = task.risk["planning_failure"] * (1 - behaviour.relaxed_planning_fix if relaxed else 1)
            if rng.random() < polluted(p):
                raise SimFault(ErrorType.VALIDATION, "plan did not converge: the goal is open-ended", dependency=model,
                               phase=step.phase, raw_output="PLAN: 1. search everything 2. search everything again",
                               latency_ms=result.latency_ms, call=result)
        if step.structured_output:
            p = task.risk["schema_mismatch"] * (1 - behaviour.patch_fix if patched else 1)
            p *= 1 - behaviour.relaxed_fix if relaxed else 1
            if rng.random() < polluted(p):
                raise SimFault(ErrorType.SCHEMA_MISMATCH, "output is not valid JSON: missing field 'total'",
                               dependency=model, phase=step.phase, missing_field="total",
                               raw_output='{"items": [{"sku": "A1", "qty": 2', latency_ms=result.latency_ms, call=result)
            p = task.risk["validation"] * (1 - behaviour.failure_summary_fix if summarised else 1)
            if rng.random() < polluted(p):
                raise SimFault(ErrorType.VALIDATION, "answer failed the success check: totals do not add up",
                               dependency=model, phase=step.phase, raw_output='{"total": -1}',
                               latency_ms=result.latency_ms, call=result)
        return result

    def tool_call(self, task: SimTask, step: Step, *, pollution: float, now_s: float, rng: random.Random) -> CallResult:
        dep = self.dependency(step.dependency)
        if task.logic and step.phase == "execution" and not step.side_effect:
            raise SimFault(ErrorType.LOGIC, f"{step.dependency}: no such record", dependency=step.dependency,
                           phase=step.phase, status=404, latency_ms=dep.latency_ms)
        self.transient(task, step.dependency, step.phase, now_s, rng)
        if rng.random() < 0.5 * self.scenario.pollution.weight * pollution:
            raise SimFault(ErrorType.TOOL_ERROR, f"Error: {step.dependency} rejected the arguments",
                           dependency=step.dependency, phase=step.phase, status=400, latency_ms=dep.latency_ms)
        return CallResult(latency_ms=int(dep.latency_ms * (0.6 + 0.8 * rng.random())))

    def side_effect(self, task: SimTask, step: Step, spec: SideEffectSpec, *, now_s: float, rng: random.Random,
                    key: str | None) -> CallResult:
        """A side-effecting tool call; timeouts may happen after the effect (the classic trap)."""
        dep = self.dependency(step.dependency)
        try:
            self.transient(task, step.dependency, step.phase, now_s, rng)
        except SimFault as fault:
            if fault.error_type is ErrorType.TIMEOUT and rng.random() < spec.commit_before_timeout:
                self._effect(task, step, spec, rng, key)
            raise
        if spec.kind == "db_rows" and rng.random() < spec.partial_failure:
            n = self._rows(task, spec)
            self.providers.insert_rows(task.task_id, step.name, rng.randint(1, max(1, n - 1)), key)
            raise SimFault(ErrorType.SERVER_ERROR, "crm.db: batch insert aborted half-way (deadlock)",
                           dependency=step.dependency, phase=step.phase, status=500, latency_ms=dep.latency_ms)
        self._effect(task, step, spec, rng, key)
        return CallResult(latency_ms=int(dep.latency_ms * (0.6 + 0.8 * rng.random())))

    def _effect(self, task: SimTask, step: Step, spec: SideEffectSpec, rng: random.Random, key: str | None) -> None:
        if spec.kind == "payment":
            self.providers.charge(task.task_id, step.name, key)
        else:
            self.providers.insert_rows(task.task_id, step.name, self._rows(task, spec), key)

    @staticmethod
    def _rows(task: SimTask, spec: SideEffectSpec) -> int:
        return random.Random(task.task_id).randint(*spec.rows)
