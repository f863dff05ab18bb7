"""The retries a client makes on httpx itself, seen and (inside a governed attempt) refused.

A stainless-generated client retries in a loop the provider hook can switch off
(``max_retries=0``). Any other client on httpx or httpx2 retries in ways no option
reaches: a hand-written loop that sends the same request again after a 429, a library
doing the same, or a transport retrying its connections (``httpx.HTTPTransport(retries=2)``,
below ``Client.send``). This module recognises both:

* **a resend**: inside one governed attempt, the same request as one that failed earlier
  in that attempt (an error status, a timeout or a dropped connection): the same method,
  host, path *and body*. The governor owns the retrying, so the resend is not sent: the
  earlier failure is raised instead, as a :class:`ResendRefused` typed from its status
  and headers, and the governor decides (its attempt budget, the fleet budget and
  breaker, the backoff honouring ``Retry-After``). Each request the provider received is
  thus one governed attempt. A failed request the code does not send again is left to
  the code.
* **a fallback**: after a failure in the attempt, a *different* request — another model
  in the body, another endpoint — is the user's own decision (a cheaper model after a
  429, a second provider): it is sent, and recorded as the task's degrade.
* **a connection retry**: httpcore announces each one through the request's ``trace``
  extension (``connection.retry.started``, after ``connection.connect_tcp.failed``); the
  hook adds a trace (chained before any the caller set) that raises the failed
  connection's own error inside a governed attempt, and reports it as a physical attempt
  to an observed call. Only requests whose transport retries get the trace.

Loaded with the first request that failed inside a governed attempt or the first request
through a retrying transport: an app whose requests succeed never imports it.
"""

from __future__ import annotations

import contextvars
import sys
import time
from collections.abc import Callable
from typing import Any

from ...text.sanitizer import Failure
from . import http_attempts

#: (the governed scope, its attempt, {endpoint: the failed request}, {id: failed response or
#: error seen, or the client's final error raised for it}) of this context
_Log = tuple[Any, Any, dict[tuple[str, str, str, int], Any], dict[int, Any]]
_failures: contextvars.ContextVar[_Log | None] = contextvars.ContextVar(
    "retrylens_failed_requests", default=None
)
#: how deep a chain of ``__cause__``/``__context__`` is followed to the provider's failure
_MAX_CHAIN = 16


class ResendRefused(Failure):
    """A failed request's resend inside one governed attempt, not sent: the governor retries."""


def _attempt_of(scope: Any) -> Any:
    """The attempt in progress: a task run's last begun attempt (also of a fast first try
    that became a run, e.g. for a step the governor retries in place), else the first try."""
    run = getattr(scope, "run", None)
    attempt = getattr(scope if run is None else run, "last_attempt", None)
    return scope if attempt is None else attempt


def endpoint(request: Any) -> tuple[str, str, str]:
    """Where a request goes: its method, host and path."""
    try:
        url = request.url
        return (str(request.method), str(url.host), str(url.path))
    except Exception:  # noqa: BLE001 - an unreadable request is its own endpoint
        return ("", "", str(id(request)))


def same_request(request: Any) -> tuple[str, str, str, int]:
    """What makes a request "the same request again": its endpoint and its body (a body
    not read yet, a stream, counts as the same: such a request is known by its endpoint)."""
    try:
        body = hash(request.content)
    except Exception:  # noqa: BLE001 - a streamed body cannot be read without sending it
        body = 0
    return (*endpoint(request), body)


def refusal(scope: Any, request: Any) -> ResendRefused | None:
    """The error to raise instead of sending ``request``, when it resends a failed one.

    A different request after a failure in the attempt is the user's fallback: sent, and
    the task is recorded degraded (:func:`_user_degraded`).
    """
    log = _failures.get()
    if log is None or log[0] is not scope or log[1] is not _attempt_of(scope):
        return None
    physical = log[2].get(same_request(request))
    if physical is None:
        if log[2]:
            _user_degraded(scope)
        return None
    return refused(physical, "inside the same governed attempt was not sent (the governor retries)")


def _user_degraded(scope: Any) -> None:
    """Record the task degraded by its own code: the fallback request is its decision."""
    materialize = getattr(scope, "materialize", None)
    run = materialize()[0] if materialize is not None else getattr(scope, "run", None) or scope
    state = getattr(run, "state", None)
    if state is not None and not state.degraded:
        state.degraded = True
        attempt = getattr(run, "last_attempt", None)
        if attempt is not None:
            attempt.degraded = True


def refused(physical: http_attempts.Physical, why: str) -> ResendRefused:
    """The provider's failure ``physical``, raised instead of its resend (``why`` says so)."""
    return ResendRefused(
        physical.error_type,
        message=f"{physical.message or physical.code} from {physical.host}; the client's resend {why}",
        retryable=physical.should_retry,
        code=physical.code,
        status=physical.status,
        retry_after_ms=physical.retry_after_ms,
    )


def note_failure(
    scope: Any, request: Any, response: Any, error: BaseException | None, latency_ms: int
) -> None:
    """Remember that ``request`` failed in the governed attempt in progress."""
    try:
        physical = physical_of(request, response, error, latency_ms)
    except Exception:  # noqa: BLE001 - a request we cannot read is not refused later
        return
    log = _log(scope)
    log[2][same_request(request)] = physical
    seen = response if error is None else error
    log[3][id(seen)] = seen
    if error is None:
        _mark(response, log[3])


#: Put on a failed response's ``extensions`` (the attempt's record of failures seen): a client
#: that raises its error with a copy of the response (openai 3.63 copies it to strip
#: credentials; the copy keeps the extensions) is still recognised as carrying that failure.
_SEEN_EXTENSION = "retrylens.seen_failing"


def _mark(response: Any, seen: dict[int, Any]) -> None:
    try:
        response.extensions[_SEEN_EXTENSION] = seen
    except Exception:  # noqa: BLE001 - a response we cannot mark is recognised by identity only
        return


def _was_seen(response: Any, seen: dict[int, Any]) -> bool:
    if seen.get(id(response)) is response:
        return True
    extensions = getattr(response, "extensions", None)
    return isinstance(extensions, dict) and extensions.get(_SEEN_EXTENSION) is seen


def note_error(scope: Any, error: BaseException) -> None:
    """Remember ``error``, a provider client's own, as a failure seen in ``scope``'s attempt."""
    _log(scope)[3][id(error)] = error


def _log(scope: Any) -> _Log:
    """The failed requests of the governed attempt in progress (a new log for a new attempt)."""
    attempt = _attempt_of(scope)
    log = _failures.get()
    if log is None or log[0] is not scope or log[1] is not attempt:
        log = (scope, attempt, {}, {})
        _failures.set(log)
    return log


def provider_error_behind(error: BaseException) -> BaseException | None:
    """The provider failure RetryLens saw in this attempt behind ``error``, a user's own.

    User code catches the error a refused retry left it (the client's ``RateLimitError``,
    an ``httpx.HTTPStatusError``, a :class:`ResendRefused`) and raises its own, ``from``
    it or inside the ``except``; the attempt failed for the provider's reason, so it is
    classified by that error: the first in the chain of ``__cause__`` (else
    ``__context__``) that is a refusal, was seen failing, or carries a response that was.
    """
    log = _failures.get()
    seen = log[3] if log is not None else {}
    link: BaseException | None = error
    for _ in range(_MAX_CHAIN):
        if link is None:
            return None
        if isinstance(link, ResendRefused) or id(link) in seen:
            break
        response = getattr(link, "response", None)
        if response is not None and _was_seen(response, seen):
            break
        link = link.__cause__ or link.__context__
    else:
        return None
    return None if link is error else link  # ``error`` itself: it is the provider's failure


def physical_of(
    request: Any, response: Any, error: BaseException | None, latency_ms: int
) -> http_attempts.Physical:
    if error is not None:
        return http_attempts.of_exception(request, error, latency_ms)
    return http_attempts.of_response(request, response, latency_ms)


# -- the stainless client's own retries, refused ----------------------------------------------
def refuse_client_retry(response: Any) -> None:
    try:
        if response.status_code < 400:
            return
        headers = response.headers
        response.extensions[http_attempts.SHOULD_RETRY_EXTENSION] = http_attempts.should_retry(
            headers
        )
        headers["x-should-retry"] = "false"
    except Exception:  # noqa: BLE001 - a response we cannot mark is left as it came
        return


def client_final_error(request: Any, error: BaseException) -> BaseException | None:
    """The error a stainless client raises for ``error`` when it has no retries left."""
    package = _calling_package()
    if package is None:
        return None
    timeout = "TimeoutException" in {cls.__name__ for cls in type(error).__mro__}
    kind = getattr(package, "APITimeoutError" if timeout else "APIConnectionError", None)
    if kind is None:
        return None
    try:
        final: BaseException = kind(request=request)
    except Exception:  # noqa: BLE001 - an unexpected signature: leave the client its own way
        return None
    log = _failures.get()
    if log is not None:
        log[3][id(final)] = final  # the error the attempt ends with stands for the failure seen
    return final


def _calling_package() -> Any:
    """The stainless client package (``openai``, ``anthropic``…) whose retry loop called send."""
    frame = sys._getframe(3)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.endswith("._base_client"):
            return sys.modules.get(name.rpartition(".")[0].partition(".")[0] or name)
        frame = frame.f_back  # type: ignore[assignment]
    return None


# -- connection retries below Client.send ------------------------------------------------------
def retries_connections(client: Any, request: Any) -> bool:
    """Whether the transport ``client`` sends ``request`` through retries failed connections."""
    try:
        transport = client._transport_for_url(request.url)
        return bool(getattr(getattr(transport, "_pool", None), "_retries", 0))
    except Exception:  # noqa: BLE001 - a transport we do not know: nothing to trace
        return False


class _ConnectionTrace:
    """httpcore's ``trace`` extension: calls ``on_retry(error)`` before each connection retry."""

    __slots__ = ("inner", "on_retry", "failed", "started")

    def __init__(self, inner: Any, on_retry: Callable[[BaseException, int], None]) -> None:
        self.inner = inner
        self.on_retry = on_retry
        self.failed: BaseException | None = None
        self.started = time.perf_counter()

    def __call__(self, name: str, info: dict[str, Any]) -> None:
        if self.inner is not None:
            self.inner(name, info)
        self.see(name, info)

    def see(self, name: str, info: dict[str, Any]) -> None:
        if not name.startswith("connection."):
            return
        if name == "connection.retry.started":
            failed, self.failed = self.failed, None
            if failed is not None:
                latency_ms = int((time.perf_counter() - self.started) * 1000)
                self.on_retry(failed, latency_ms)
        elif name == "connection.retry.complete":
            self.started = time.perf_counter()  # the next connection's try begins
        elif name.endswith(".failed"):
            self.failed = info.get("exception")


class _AsyncConnectionTrace(_ConnectionTrace):
    __slots__ = ()

    async def __call__(self, name: str, info: dict[str, Any]) -> None:  # type: ignore[override]
        if self.inner is not None:
            await self.inner(name, info)
        self.see(name, info)


def trace_connections(
    request: Any, on_retry: Callable[[BaseException, int], None], is_async: bool
) -> Any:
    """Add the connection-retry trace to ``request``; returns what :func:`untrace` restores."""
    extensions = request.extensions
    inner = extensions.get("trace")
    kind = _AsyncConnectionTrace if is_async else _ConnectionTrace
    extensions["trace"] = kind(inner, on_retry)
    return inner


def untrace(request: Any, inner: Any) -> None:
    try:
        if inner is None:
            request.extensions.pop("trace", None)
        else:
            request.extensions["trace"] = inner
    except Exception:  # noqa: BLE001
        return
