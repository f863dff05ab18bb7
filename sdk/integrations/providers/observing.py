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

import _thread
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import provider_hook

if TYPE_CHECKING:
    from retrylens.schemas import RetryEvent

    from ...core.governor import Governor
    from ...core.run import TaskRun
    from ...core.state import Attempt
    from .http_attempts import Physical

#: :class:`~retrylens.sdk.core.first_try.FirstTry`, :func:`~retrylens.sdk.core.first_try.compact_event` and :mod:`.http_attempts`,
#: loaded with the first recorded request and kept (an ``import`` statement per request runs
#: the import machinery on every observed call).
_FIRST_TRY: Any = None
_COMPACT_EVENT: Any = None
_ATTEMPTS: Any = None


def _load_first_try() -> tuple[Any, Any]:
    global _FIRST_TRY, _COMPACT_EVENT
    from ...core.first_try import FirstTry, compact_event

    _FIRST_TRY, _COMPACT_EVENT = FirstTry, compact_event
    return FirstTry, compact_event


def _attempts() -> Any:
    global _ATTEMPTS
    if _ATTEMPTS is None:
        from . import http_attempts

        _ATTEMPTS = http_attempts
    return _ATTEMPTS


_lock = _thread.allocate_lock()  # not threading: an app that never observes pays nothing for it
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


def model_call(client: str = "model") -> _ModelCall:
    """Mark a model call made with a client RetryLens does not know (plain httpx or httpx2).

        with observing.model_call("my-llm"):
            answer = my_client.complete(prompt)   # its own retry loop, on httpx

    Under :func:`observe`, every HTTP request sent inside is one physical attempt of one
    operation named ``client`` (whatever the host; see :mod:`.plain_calls` for requests
    outside a marked call), and the block's exception, if any, is its failure. Without
    ``observe()``, inside a governed attempt, or inside an adapter's model call it does
    nothing: those record the requests themselves. Usable as ``with`` and ``async with``.
    """
    return _ModelCall(client)


class _ModelCall:
    __slots__ = ("client", "_observer", "_operation", "_token")

    def __init__(self, client: str) -> None:
        self.client = client
        self._observer: Observer | None = None
        self._operation: Any = None
        self._token: Any = None

    def __enter__(self) -> _ModelCall:
        from ...core import attempt_scope

        observer = _active
        if (
            observer is None
            or attempt_scope.current.get() is not None
            or attempt_scope.recorded.get()
            or attempt_scope.operation.get() is not None
        ):
            return self  # recorded elsewhere, or not observed
        self._observer, self._operation = observer, observer.begin(self.client)
        self._token = attempt_scope.operation.set(self._operation)
        return self

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        from ...core import attempt_scope
        from . import operations

        observer, self._observer = self._observer, None
        if observer is None:
            return
        attempt_scope.operation.reset(self._token)
        operations.end(observer, self._operation, error, None)

    async def __aenter__(self) -> _ModelCall:
        return self.__enter__()

    async def __aexit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        self.__exit__(kind, error, tb)


#: Gaps shorter than this between a failed request and its resend are the client's own
#: overhead (building the request, a GC pause), not a wait it chose: no provider client
#: backs off that little unless the provider asked it to (``Retry-After``).
IMMEDIATE_RESEND_MS = 20


def _backed_off(waited_ms: int, retry_after_ms: int | None) -> bool:
    """Whether a resend ``waited_ms`` after a failure waited on purpose.

    Timing alone cannot tell a 5 ms sleep from a busy machine, so a short gap counts as a
    backoff only when it honoured the ``Retry-After`` the failed response asked for.
    """
    if waited_ms >= IMMEDIATE_RESEND_MS:
        return True
    return retry_after_ms is not None and 0 < retry_after_ms <= waited_ms


class _Operation:
    """One client call being recorded.

    A call answered at once costs one compact event, as a governed call's first try does
    (:func:`~retrylens.sdk.core.first_try.compact_event`); its task run is built only when a
    request fails or the client sends another (as a fast first try materializes).
    """

    __slots__ = (
        "client",
        "run",
        "attempt",
        "failed",
        "answered",
        "last_end",
        "requests",
        "host",
        "started",
    )

    def __init__(self, client: str) -> None:
        self.client = client
        self.run: TaskRun | None = None
        self.attempt: Attempt | None = None
        self.failed: Physical | None = None  # the last request, when it failed
        self.answered: int | None = None  # the last request's latency (ms), when it succeeded
        self.last_end = 0.0  # when the last request ended (monotonic)
        self.requests = 0
        self.host = ""  # the first request's
        self.started = 0.0  # when the first request began, on the governor's clock


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
        #: (client, host) -> the compact event template of that call site, built once
        self._sites: dict[tuple[str, str], tuple[dict[str, Any], set[str]]] = {}
        #: What the gap between a failed request and its resend is read on (seconds). A
        #: test that must see "at once" on a loaded machine sets a clock that stands still.
        self.clock: Callable[[], float] = time.monotonic

    @property
    def governor(self) -> Governor:
        """The recording governor: it decides nothing, its runs only record what happened."""
        if self._governor is None:
            from ...core.governor import Governor
            from ...core.policy import BreakerPolicy, FleetBudgetPolicy, RetryPolicy, TaskBudget

            emit = self._emit
            if emit is None:
                from ...transport.build import build_emitter

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

    def answered(self, operation: _Operation, request: Any, response: Any, latency_ms: int) -> None:
        """A request that got a response below 400 (the hook checked the status).

        The first request of a call answered at once is only noted: if the call ends
        there, :meth:`end` records it as one compact event, with no :class:`Physical`
        built for it nor any task state.
        """
        try:
            attempts = _ATTEMPTS or _attempts()
            spans = self._spans
            if operation.requests or (spans if spans is not None else self._tracing()):
                self._record(operation, attempts.of_response(request, response, latency_ms))
                return
            now = self.clock()
            g = self._governor or self.governor
            operation.host = attempts.host_of(request)
            operation.started = g.clock() - latency_ms / 1000
            operation.last_end = now
            operation.answered = latency_ms  # recorded at the end, with the call's result
            operation.requests = 1
        except Exception:  # noqa: BLE001 - observing never changes the call
            _log_failure("recording a provider request failed")

    def physical(self, operation: _Operation, request: Physical) -> None:
        try:
            self._record(operation, request)
        except Exception:  # noqa: BLE001 - observing never changes the call
            _log_failure("recording a provider request failed")

    def end(self, operation: _Operation, error: BaseException | None, result: Any = None) -> None:
        try:
            if operation.run is None and error is None and operation.requests:
                self._succeeded_at_once(operation, result)  # the common case
            else:
                self._finish(operation, error, result)
        except Exception:  # noqa: BLE001
            _log_failure("recording the end of a provider call failed")

    # -- recording ------------------------------------------------------------------------
    def _record(self, op: _Operation, request: Physical) -> None:
        now = self.clock()
        if self._tracing():
            from .observe_spans import attempt_span

            attempt_span(op.client, request, op.requests, self.tracer_provider)
        op.requests += 1
        if op.requests == 1:  # the call's first request
            g = self.governor
            op.host = request.host
            op.started = g.clock() - request.latency_ms / 1000
            op.last_end = now
            if not request.failed:
                op.answered = request.latency_ms  # recorded at the end, with the call's result
                return
            self._materialized(op)
            self._failed(op, request)
            return
        run, attempt = self._materialized(op)
        waited = max(0, int((now - request.latency_ms / 1000 - op.last_end) * 1000))
        if op.failed is not None:
            if _backed_off(waited, op.failed.retry_after_ms):
                why = f"the {op.client} client retried on its own after {waited} ms"
            else:
                why, waited = f"the {op.client} client retried on its own at once", 0
            self._decide(op, "retry", why, waited)
        op.attempt = run.begin()
        op.last_end = now
        if request.failed:
            self._failed(op, request)
        else:
            op.failed, op.answered = None, request.latency_ms

    def _succeeded_at_once(self, op: _Operation, result: Any) -> None:
        """The call's one request was answered: its compact event, as a first try's."""
        g = self._governor or self.governor
        site = self._sites.get((op.client, op.host))
        if site is None:
            site = self._site(op.client, op.host)
        g.emit((_COMPACT_EVENT or _load_first_try()[1])(g, site, None, op.started, result))

    def _site(self, client: str, host: str) -> tuple[dict[str, Any], set[str]]:
        """The compact template of calls of ``client`` to ``host``: a first try's for that goal."""
        first_try = _load_first_try()[0](
            self.governor, f"{client} call to {host}", self.agent, "execution", client, None
        )
        if len(self._sites) >= 1024:  # hosts made on the fly: keep the memo bounded
            self._sites.clear()
        self._sites[(client, host)] = first_try.template
        return first_try.template  # type: ignore[no-any-return]

    def _materialized(self, op: _Operation) -> tuple[TaskRun, Attempt]:
        """The call's task run, built now as a first try that began with its first request."""
        if op.run is None or op.attempt is None:
            first = (_FIRST_TRY or _load_first_try()[0])(
                self.governor,
                f"{op.client} call to {op.host}",
                self.agent,
                "execution",
                op.client,
                None,
            )
            first.started = op.started
            op.run, op.attempt = first.materialize()
        if op.answered is not None:  # an answered request the client followed with another
            op.run.succeed(op.attempt, None, latency_ms=op.answered)
            op.answered = None
        return op.run, op.attempt

    def _failed(self, op: _Operation, request: Physical) -> None:
        from ...text.sanitizer import Failure

        assert op.run is not None and op.attempt is not None
        op.run.record_failure(
            op.attempt, Failure.of_request(request), latency_ms=request.latency_ms
        )
        op.failed, op.answered = request, None

    def _decide(self, op: _Operation, what: str, reason: str, waited: int = 0) -> None:
        from retrylens.schemas.taxonomy import Decision

        from ...core.verdicts import Verdict

        assert op.run is not None and op.attempt is not None
        if what == "retry":
            decision = Decision.RETRY_BACKOFF if waited else Decision.RETRY_SAME
            op.run.record_decision(op.attempt, Verdict(decision, reason, backoff_ms=waited))
        else:
            op.run.record_decision(op.attempt, Verdict(Decision.GIVE_UP, reason))

    def _finish(self, op: _Operation, error: BaseException | None, result: Any) -> None:
        from retrylens.schemas.taxonomy import TaskOutcome

        if not op.requests:
            return  # the call sent nothing (it failed before its first request)
        answered, op.answered = op.answered, None  # recorded below, with the call's end
        run, attempt = self._materialized(op)
        if answered is not None and error is None:
            run.succeed(attempt, result, latency_ms=answered)
            run.finish(TaskOutcome.SUCCEEDED)
            return
        if error is not None and op.failed is None:
            # answered, yet the call failed (an unreadable answer): the attempt failed
            run.record_failure(attempt, error)
        self._decide(op, "give up", f"the {op.client} client gave up after {op.requests} requests")
        run.finish(TaskOutcome.FAILED)

    def _tracing(self) -> bool:
        if self._spans is None:
            from ...core.governor import _otel_configured

            self._spans = _otel_configured()
        return self._spans


def _log_failure(what: str) -> None:
    """Log the exception being handled (logging loads only when something went wrong)."""
    import logging

    logging.getLogger(__name__).exception(what)
