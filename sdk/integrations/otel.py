"""OpenTelemetry out: a governed task's events become spans, and its events carry the span ids.

    from retrylens.sdk.integrations.otel import traced
    governor = Governor(policy, project="shop", emit=traced(emitter.emit))

:func:`traced` wraps the governor's ``emit``: it sees every event of every task in the
order the governor records them, in the thread (or asyncio task) that runs the task,
and turns that stream into spans the way gRPC's retry design (A45) does — the governed
task is one span (``invoke_agent <agent>``), each attempt a child span
(``attempt <n> <agent>``) that ends when the governor has decided what follows it, so the
decision, reason and backoff are attributes of the attempt they judge and the backoff is
the gap between attempt spans, not latency. Attributes follow the GenAI semantic
conventions where they apply (``gen_ai.operation.name``, ``gen_ai.agent.name``,
``gen_ai.request.model`` from the dependency, ``gen_ai.usage.input_tokens`` /
``output_tokens``, ``error.type``); ours are under ``retrylens.*`` (attempt, decision,
reason, backoff, policy, degraded, outcome; an idempotency key only as its SHA-256 hash).

The events themselves are rewritten before they travel on: ``trace_id`` is the trace of
the OpenTelemetry context current when the task started (a new trace when there is
none), ``span_id`` the task's or attempt's span, and ``task_started.parent_span_id`` the
span that was current — so a trace in Jaeger/Tempo/Phoenix and a task in RetryLens point
at each other. While an attempt the governor started runs, its span is the current
context, so spans an instrumented model client opens inside it are its children (a first
try on the governor's fast path runs before any event exists and is recorded after it). Without a configured SDK
(the API's no-op tracer) no span is recorded and only the current trace id is adopted.

``opentelemetry-api`` is imported when :func:`traced` is called (the ``otel`` extra).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retrylens.schemas.taxonomy import EventKind, TaskOutcome

if TYPE_CHECKING:
    from retrylens.schemas import RetryEvent

log = logging.getLogger("retrylens.sdk.integrations.otel")
_ATTEMPT_KINDS = frozenset({EventKind.ATTEMPT_STARTED, EventKind.ATTEMPT_FAILED, EventKind.ATTEMPT_SUCCEEDED,
                            EventKind.DECISION})


@dataclass
class _Task:
    span: Any
    trace_id: str | None
    span_id: str | None
    parent_span_id: str | None
    attempt: Any = None
    attempt_id: str | None = None
    attempt_end_ns: int = 0
    token: Any = None
    token_thread: int = 0
    attempts: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def traced(emit: Callable[[RetryEvent], object], *, tracer_provider: Any = None,
           operation: str = "invoke_agent", model_of: Callable[[str], str | None] | None = None,
           ) -> Callable[[RetryEvent], None]:
    """``emit`` preceded by spans for every task; ``model_of(dependency)`` names the model (default: itself)."""
    return OtelSpans(emit, tracer_provider=tracer_provider, operation=operation, model_of=model_of)


class OtelSpans:
    """The event listener behind :func:`traced`; thread-safe, one per governor."""

    def __init__(self, emit: Callable[[RetryEvent], object], *, tracer_provider: Any = None,
                 operation: str = "invoke_agent", model_of: Callable[[str], str | None] | None = None) -> None:
        from opentelemetry import context, trace

        from retrylens import __version__

        self._emit = emit
        self._trace = trace
        self._context = context
        self.tracer = trace.get_tracer("retrylens.sdk", __version__, tracer_provider=tracer_provider)
        self.operation = operation
        self.model_of = model_of or (lambda dependency: dependency or None)
        self._tasks: dict[str, _Task] = {}
        self._lock = threading.Lock()

    def __call__(self, event: RetryEvent) -> None:
        try:
            event = self._observe(event)
        except Exception:  # noqa: BLE001 - tracing must never lose the event or break the agent
            log.exception("turning a retry event into spans failed")
        self._emit(event)

    # -- the event stream --------------------------------------------------------------------
    def _observe(self, e: RetryEvent) -> RetryEvent:
        with self._lock:
            task = self._tasks.get(e.task_id)
            if e.kind == EventKind.TASK_STARTED or (task is None and e.outcome is not None):
                task = self._open(e)
            if task is None:
                return e
            if e.kind == EventKind.ATTEMPT_STARTED or (e.kind in _ATTEMPT_KINDS and task.attempt is None):
                self._begin_attempt(task, e)
            rewritten = self._rewrite(task, e)
            if e.kind in (EventKind.ATTEMPT_FAILED, EventKind.ATTEMPT_SUCCEEDED):
                self._attempt_result(task, e)
            elif e.kind == EventKind.DECISION:
                self._decision(task, e)
            elif e.kind == EventKind.SIDE_EFFECT:
                self._side_effect(task, e)
            elif e.kind == EventKind.HANDOFF:
                task.span.add_event("retrylens.handoff", {"retrylens.reason": e.decision_reason},
                                    timestamp=_ns(e))
            if e.kind == EventKind.TASK_FINISHED or e.outcome is not None:
                self._close(task, e)
                del self._tasks[e.task_id]
            return rewritten

    def _open(self, e: RetryEvent) -> _Task:
        trace = self._trace
        parent_task = self._tasks.get(e.parent_task_id or "")
        if parent_task is not None:
            parent_ctx = trace.set_span_in_context(parent_task.attempt or parent_task.span)
        else:
            parent_ctx = self._context.get_current()
        caller = trace.get_current_span(parent_ctx).get_span_context()
        start = _ns(e) - (e.latency_ms * 1_000_000 if e.outcome is not None else 0)
        span = self.tracer.start_span(
            f"{self.operation} {e.agent.name}", context=parent_ctx, kind=trace.SpanKind.INTERNAL, start_time=start,
            attributes=_clean({
                "gen_ai.operation.name": self.operation, "gen_ai.agent.name": e.agent.name,
                "retrylens.task_id": e.task_id, "retrylens.project": e.project, "retrylens.phase": e.phase,
                "retrylens.parent_task_id": e.parent_task_id, "retrylens.agent.role": e.agent.role,
                "retrylens.policy.id": e.policy_id, "retrylens.policy.version": e.policy_version,
            }))
        own = span.get_span_context()
        if own.is_valid:
            trace_id, span_id = f"{own.trace_id:032x}", f"{own.span_id:016x}"
        else:
            trace_id, span_id = (f"{caller.trace_id:032x}" if caller.is_valid else None), None
        task = _Task(span=span, trace_id=trace_id, span_id=span_id,
                     parent_span_id=f"{caller.span_id:016x}" if caller.is_valid else None)
        self._tasks[e.task_id] = task
        return task

    def _begin_attempt(self, task: _Task, e: RetryEvent) -> None:
        self._end_attempt(task)
        start = _ns(e) - (e.latency_ms * 1_000_000 if e.kind != EventKind.ATTEMPT_STARTED else 0)
        task.attempts += 1
        model = self.model_of(e.dependency) if e.dependency else None
        task.attempt = self.tracer.start_span(
            f"attempt {e.attempt} {e.agent.name}", context=self._trace.set_span_in_context(task.span),
            start_time=start, attributes=_clean({
                "gen_ai.operation.name": self.operation, "gen_ai.agent.name": e.agent.name,
                "gen_ai.request.model": model, "retrylens.attempt": e.attempt, "retrylens.phase": e.phase,
                "retrylens.dependency": e.dependency, "retrylens.degraded": e.degraded,
                "retrylens.policy.version": e.policy_version, "retrylens.task_id": e.task_id,
                "retrylens.previous_attempts": e.attempt - 1 if e.attempt else None,
            }))
        own = task.attempt.get_span_context()
        task.attempt_id = f"{own.span_id:016x}" if own.is_valid else None
        if e.kind == EventKind.ATTEMPT_STARTED and own.is_valid:
            task.token = self._context.attach(self._trace.set_span_in_context(task.attempt))
            task.token_thread = threading.get_ident()

    def _attempt_result(self, task: _Task, e: RetryEvent) -> None:
        span, status = task.attempt, self._trace.Status
        self._detach(task)
        task.attempt_end_ns = _ns(e)
        task.tokens_in += e.tokens_in
        task.tokens_out += e.tokens_out
        task.cost_usd += e.cost_usd
        span.set_attributes(_clean({
            "gen_ai.usage.input_tokens": e.tokens_in, "gen_ai.usage.output_tokens": e.tokens_out,
            "retrylens.cost_usd": e.cost_usd, "retrylens.latency_ms": e.latency_ms, "retrylens.degraded": e.degraded,
        }))
        if e.kind == EventKind.ATTEMPT_FAILED:
            detail = e.error_detail
            span.set_attributes(_clean({
                "error.type": e.error_type.value if e.error_type else "unknown", "retrylens.retryable": e.retryable,
                "http.response.status_code": detail.status if detail else None,
                "retrylens.error.code": detail.code if detail else None,
            }))
            span.set_status(status(self._trace.StatusCode.ERROR, detail.message if detail else ""))
        else:
            span.set_status(status(self._trace.StatusCode.OK))
            self._end_attempt(task)

    def _decision(self, task: _Task, e: RetryEvent) -> None:
        span = task.attempt
        span.set_attributes(_clean({
            "retrylens.decision": e.decision.value, "retrylens.decision.reason": e.decision_reason,
            "retrylens.backoff_ms": e.backoff_ms, "retrylens.degraded": e.degraded,
            "retrylens.shadow_decision": e.shadow_decision.value if e.shadow_decision else None,
            "retrylens.propensity": e.propensity,
        }))
        self._end_attempt(task)

    def _side_effect(self, task: _Task, e: RetryEvent) -> None:
        target = task.attempt or task.span
        for effect in e.side_effects:
            target.add_event("retrylens.side_effect", _clean({
                "retrylens.tool": effect.tool, "retrylens.side_effect.status": effect.status.value,
                "retrylens.idempotency_key_hash": key_hash(effect.idempotency_key),
                "retrylens.rollback": effect.rollback,
            }), timestamp=_ns(e))

    def _close(self, task: _Task, e: RetryEvent) -> None:
        self._end_attempt(task)
        outcome = e.outcome.value if e.outcome else ""
        task.span.set_attributes(_clean({
            "retrylens.outcome": outcome, "retrylens.attempts": task.attempts,
            "retrylens.previous_attempts": max(task.attempts - 1, 0),
            "gen_ai.usage.input_tokens": task.tokens_in, "gen_ai.usage.output_tokens": task.tokens_out,
            "retrylens.cost_usd": round(task.cost_usd, 9), "retrylens.degraded": e.degraded,
        }))
        status = self._trace.Status
        failed = e.outcome not in (TaskOutcome.SUCCEEDED, None)
        task.span.set_status(status(self._trace.StatusCode.ERROR, outcome) if failed
                             else status(self._trace.StatusCode.OK))
        task.span.end(end_time=_ns(e))

    def _end_attempt(self, task: _Task) -> None:
        if task.attempt is not None:
            self._detach(task)
            task.attempt.end(end_time=task.attempt_end_ns or None)
            task.attempt, task.attempt_id, task.attempt_end_ns = None, None, 0

    def _detach(self, task: _Task) -> None:
        if task.token is not None and task.token_thread == threading.get_ident():
            self._context.detach(task.token)
        task.token = None

    def _rewrite(self, task: _Task, e: RetryEvent) -> RetryEvent:
        """The event with the ids of its spans (unchanged where no span was recorded)."""
        update: dict[str, Any] = {}
        if task.trace_id:
            update["trace_id"] = task.trace_id
        in_attempt = e.kind in _ATTEMPT_KINDS or (e.kind == EventKind.SIDE_EFFECT and task.attempt_id)
        if task.span_id:
            if in_attempt and task.attempt_id:
                update["span_id"], update["parent_span_id"] = task.attempt_id, task.span_id
            else:
                update["span_id"], update["parent_span_id"] = task.span_id, task.parent_span_id
        elif e.kind == EventKind.TASK_STARTED and task.parent_span_id:
            update["parent_span_id"] = task.parent_span_id
        return e.model_copy(update=update) if update else e


def key_hash(key: str) -> str:
    """What spans carry instead of an idempotency key: its SHA-256, hex, 16 digits."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _ns(e: RetryEvent) -> int:
    return int(e.ts.timestamp() * 1_000_000) * 1_000


def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if v is not None and v != ""}
