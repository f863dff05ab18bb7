"""Retry analytics for an agent that uses no governor, from one line at start-up.

    import retrylens.sdk
    retrylens.sdk.observe(agent="support")

From then on every call of a provider client (openai, anthropic, any stainless-generated
client on httpx or httpx2, imported before or after this line) is recorded as one task:
its physical requests are its attempts (a 429, a 529, a 5xx, a timeout or a dropped
connection each a failed attempt, typed from status and headers), each retry the client
made on its own is a decision, and the call's end is the task's outcome. The events go
through the emitter (the spool, or Kafka when configured), like a governor's.

Nothing about the call changes: the client still decides its retries, and whatever it
returns or raises reaches the caller untouched (a failure to record is logged, never
raised). Inside a governed call the governor records the requests itself, so nothing is
counted twice. An app exporting OpenTelemetry traces also gets one child span per
physical request under the active (GenAI) span, see :mod:`.observe_spans`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from retrylens.schemas.taxonomy import Decision, TaskOutcome

from . import provider_hook

if TYPE_CHECKING:
    from retrylens.schemas import RetryEvent

    from .governor import Governor
    from .http_attempts import Physical
    from .run import TaskRun
    from .state import Attempt

log = logging.getLogger(__name__)
_lock = threading.Lock()
_active: Observer | None = None


def observe(
    *,
    project: str = "default",
    agent: str = "agent",
    emit: Callable[[RetryEvent], object] | None = None,
    spans: bool | None = None,
    tracer_provider: Any = None,
) -> Observer:
    """Record every provider call from now on (idempotent: a second call returns the first).

    ``emit`` defaults to :func:`~retrylens.sdk.build_emitter`'s emitter. ``spans``: add a
    child span per physical request to the application's OpenTelemetry traces; ``None``
    does so when the application has set a real global tracer provider or passes
    ``tracer_provider`` (as instrumentors take it).
    """
    global _active
    with _lock:
        if _active is None:
            if spans is None and tracer_provider is not None:
                spans = True
            _active = Observer(project=project, agent=agent, emit=emit, spans=spans)
            _active.tracer_provider = tracer_provider
        provider_hook.install(_active)
        return _active


def stop_observing() -> None:
    """Stop recording provider calls (the governor's own hook stays while a governor lives)."""
    global _active
    with _lock:
        provider_hook.stop_observing()
        _active = None


class _Operation:
    """One client call being recorded: its task run and its attempt in progress."""

    __slots__ = ("client", "run", "attempt", "failed", "last_end", "requests")

    def __init__(self, client: str) -> None:
        self.client = client
        self.run: TaskRun | None = None
        self.attempt: Attempt | None = None
        self.failed: Physical | None = None
        self.last_end = 0.0
        self.requests = 0


class Observer:
    """Turns the provider hook's reports into a task per call (see the module docstring)."""

    def __init__(
        self,
        *,
        project: str,
        agent: str,
        emit: Callable[[RetryEvent], object] | None,
        spans: bool | None,
    ) -> None:
        self.project, self.agent = project, agent
        self._emit = emit
        self._governor: Governor | None = None
        self._spans = spans
        self.tracer_provider: Any = None

    @property
    def governor(self) -> Governor:
        """The recording governor: it decides nothing, its runs only record what happened."""
        if self._governor is None:
            from .governor import Governor
            from .policy import BreakerPolicy, FleetBudgetPolicy, RetryPolicy, TaskBudget

            emit = self._emit
            if emit is None:
                from .transport.build import build_emitter

                emit = build_emitter().emit
            policy = RetryPolicy(
                budget=TaskBudget(max_attempts=1_000),
                breaker=BreakerPolicy(enabled=False),
                fleet_budget=FleetBudgetPolicy(enabled=False),
            )
            self._governor = Governor(policy, project=self.project, emit=emit, otel=False)
        return self._governor

    # -- the hook's reports ---------------------------------------------------------------
    def begin(self, client: str) -> _Operation:
        return _Operation(client)

    def physical(self, operation: _Operation, request: Physical) -> None:
        try:
            self._record(operation, request)
        except Exception:  # noqa: BLE001 - observing never changes the call
            log.exception("recording a provider request failed")

    def end(self, operation: _Operation, error: BaseException | None, result: Any = None) -> None:
        try:
            self._finish(operation, error, result)
        except Exception:  # noqa: BLE001
            log.exception("recording the end of a provider call failed")

    # -- recording ------------------------------------------------------------------------
    def _record(self, op: _Operation, request: Physical) -> None:
        from .rules import Verdict
        from .sanitizer import Failure

        now = time.monotonic()
        started = now - request.latency_ms / 1000
        if self._tracing():
            from .observe_spans import attempt_span

            attempt_span(op.client, request, op.requests, self.tracer_provider)
        op.requests += 1
        if op.run is None:
            op.run = self.governor.start(
                f"{op.client} call to {request.host}",
                agent=self.agent,
                dependency=op.client,
                compact=True,
            )
        elif op.attempt is not None and op.failed is not None:
            waited = max(0, int((started - op.last_end) * 1000))
            op.run.record_decision(
                op.attempt,
                Verdict(
                    Decision.RETRY_BACKOFF if waited else Decision.RETRY_SAME,
                    f"the {op.client} client retried on its own after {waited} ms",
                    backoff_ms=waited,
                ),
            )
        op.attempt = op.run.begin()
        op.last_end = now
        if request.failed:
            assert request.error_type is not None
            failure = Failure(
                request.error_type,
                message=request.message,
                retryable=request.should_retry,
                code=request.code,
                status=request.status,
                retry_after_ms=request.retry_after_ms,
            )
            op.run.record_failure(op.attempt, failure, latency_ms=request.latency_ms)
            op.failed = request
        else:
            op.failed = None
            op.run.succeed(op.attempt, None, latency_ms=request.latency_ms)

    def _finish(self, op: _Operation, error: BaseException | None, result: Any) -> None:
        from .rules import Verdict

        run = op.run
        if run is None:
            return  # the call sent nothing (it failed before its first request)
        if op.failed is None and error is None:
            run.finish(TaskOutcome.SUCCEEDED)
            return
        if op.failed is not None and op.attempt is not None:
            run.record_decision(
                op.attempt,
                Verdict(
                    Decision.GIVE_UP,
                    f"the {op.client} client gave up after {op.requests} requests",
                ),
            )
        run.finish(TaskOutcome.FAILED)

    def _tracing(self) -> bool:
        if self._spans is None:
            from .governor import _otel_configured

            self._spans = _otel_configured()
        return self._spans
