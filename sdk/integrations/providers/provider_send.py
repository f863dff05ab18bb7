"""What the provider hook does with each HTTP request a provider client sends.

:mod:`.provider_hook` puts :func:`wrap_send` / :func:`wrap_asend` on ``Client.send`` and
``AsyncClient.send`` of httpx and httpx2. Per request, by the context it is sent in:

* outside any governed, recorded or observed call: the library's own send, after one
  context-variable read;
* inside a governed attempt (:data:`~retrylens.sdk.core.attempt_scope.current`): the governor owns the
  retrying. A failed response gets ``x-should-retry: false``, a timeout or connection
  error becomes the client's own final error, a resend of a failed request is refused
  and a transport's connection retry is not made (:mod:`.http_resends`);
  ``RETRYLENS_PROVIDER_RETRIES=client`` leaves the retries to the client;
* inside an adapter's attempt (:data:`~retrylens.sdk.core.attempt_scope.recorded`): reported to its
  recorder (:mod:`.client_retries`), which decides a resend of a failed request before
  it goes out (sent after the governor's backoff, or refused when the governor stops);
* under :func:`retrylens.sdk.observe`: reported to the :class:`Observer`, into the
  operation of the client call in progress (:data:`~retrylens.sdk.core.attempt_scope.operation`, set by
  :mod:`.provider_calls`), or, for a request outside one, as :mod:`.plain_calls` groups it.

What the call returns or raises is never changed by observing. This module holds the
observer of ungoverned calls (:func:`set_observer`), read on every request.
"""

from __future__ import annotations

import functools
import os
import time
from typing import TYPE_CHECKING, Any, Protocol

from ...core import attempt_scope

if TYPE_CHECKING:
    from . import http_attempts

_CLIENT_RETRIES_ENV = "RETRYLENS_PROVIDER_RETRIES"


class Observer(Protocol):
    """What the hook reports to outside governed calls (:mod:`.observing` implements it)."""

    def begin(self, client: str) -> Any: ...
    def answered(self, operation: Any, request: Any, response: Any, latency_ms: int) -> None: ...
    def physical(self, operation: Any, request: http_attempts.Physical) -> None: ...
    def end(self, operation: Any, error: BaseException | None, result: Any = None) -> None: ...


#: the observer of ungoverned provider calls, or None (not observing)
observer: Observer | None = None
_resends: Any = None  # the http_resends module, loaded with the first failed governed request
_plain: Any = None  # the plain_calls module, loaded with the first request under observe()
_NOT_TRACED = object()


def set_observer(new: Observer | None) -> None:
    """Report ungoverned requests to ``new`` from now on (``None``: stop observing).

    When observing stops, the plain requests' operations still open (their last request
    failed) end as failed.
    """
    global observer
    old, observer = observer, new
    if old is not None and new is None and _plain is not None:
        _plain.close_open()


def owns_retries() -> bool:
    """Whether the governor, not the provider client, retries inside governed attempts."""
    return os.environ.get(_CLIENT_RETRIES_ENV, "governor").strip().lower() != "client"


def refused_cause(error: BaseException) -> BaseException | None:
    """The refused resend a stainless client wrapped as its connection error, if it was one."""
    cause = error.__cause__
    if _resends is not None and isinstance(cause, _resends.ResendRefused):
        return cause
    return None


def wrap_send(original: Any) -> Any:
    @functools.wraps(original)
    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        scope = attempt_scope.current.get()
        if scope is None:
            recorder = attempt_scope.recorded.get()
            if recorder:  # an adapter's attempt: its recorder counts the client's retries
                if recorder is True:
                    return original(self, request, *args, **kwargs)
                if recorder.failed is not None or recorder.stopped is not None:
                    recorder.before_send(request)  # a resend: the governor decides first
                return send_seen(self, request, *args, **kwargs)
            watcher = observer
            if watcher is None:
                return original(self, request, *args, **kwargs)
            operation = attempt_scope.operation.get()
            if operation is None:
                client = _plain_client(request)
                if client is None:
                    return original(self, request, *args, **kwargs)
                return _plain.send(watcher, client, send_seen, self, request, args, kwargs)
            return send_observed(self, request, watcher, operation, args, kwargs)
        return send_seen(self, request, *args, **kwargs)

    def send_observed(
        self: Any, request: Any, watcher: Observer, operation: Any, args: Any, kwargs: Any
    ) -> Any:
        """A request of an observed client call: reported to its operation, nothing else."""
        traced = _trace_connections(self, request, None, False)
        started = time.perf_counter()
        try:
            response = original(self, request, *args, **kwargs)
        except Exception as error:
            _to_operation(watcher, operation, request, None, error, started)
            raise
        finally:
            if traced is not _NOT_TRACED:
                _resends.untrace(request, traced)
        _to_operation(watcher, operation, request, response, None, started)
        return response

    def send_seen(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        scope = attempt_scope.current.get()
        _refuse_resend(scope, request)
        traced = _trace_connections(self, request, scope, False)
        started = time.perf_counter()
        try:
            response = original(self, request, *args, **kwargs)
        except Exception as error:
            _after(request, None, error, started, scope)
            raise
        finally:
            if traced is not _NOT_TRACED:
                _resends.untrace(request, traced)
        return _after(request, response, None, started, scope)

    return send


def wrap_asend(original: Any) -> Any:
    @functools.wraps(original)
    async def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        scope = attempt_scope.current.get()
        if scope is None:
            recorder = attempt_scope.recorded.get()
            if recorder:  # an adapter's attempt: its recorder counts the client's retries
                if recorder is True:
                    return await original(self, request, *args, **kwargs)
                if recorder.failed is not None or recorder.stopped is not None:
                    await recorder.abefore_send(request)  # a resend: the governor decides first
                return await send_seen(self, request, *args, **kwargs)
            watcher = observer
            if watcher is None:
                return await original(self, request, *args, **kwargs)
            operation = attempt_scope.operation.get()
            if operation is None:
                client = _plain_client(request)
                if client is None:
                    return await original(self, request, *args, **kwargs)
                return await _plain.asend(watcher, client, send_seen, self, request, args, kwargs)
            return await send_observed(self, request, watcher, operation, args, kwargs)
        return await send_seen(self, request, *args, **kwargs)

    async def send_observed(
        self: Any, request: Any, watcher: Observer, operation: Any, args: Any, kwargs: Any
    ) -> Any:
        """A request of an observed client call: reported to its operation, nothing else."""
        traced = _trace_connections(self, request, None, True)
        started = time.perf_counter()
        try:
            response = await original(self, request, *args, **kwargs)
        except Exception as error:
            _to_operation(watcher, operation, request, None, error, started)
            raise
        finally:
            if traced is not _NOT_TRACED:
                _resends.untrace(request, traced)
        _to_operation(watcher, operation, request, response, None, started)
        return response

    async def send_seen(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        scope = attempt_scope.current.get()
        _refuse_resend(scope, request)
        traced = _trace_connections(self, request, scope, True)
        started = time.perf_counter()
        try:
            response = await original(self, request, *args, **kwargs)
        except Exception as error:
            _after(request, None, error, started, scope)
            raise
        finally:
            if traced is not _NOT_TRACED:
                _resends.untrace(request, traced)
        return _after(request, response, None, started, scope)

    return send


def _plain_client(request: Any) -> str | None:
    """The provider a request outside any client call goes to (see :mod:`.plain_calls`)."""
    global _plain
    if _plain is None:
        from . import plain_calls

        _plain = plain_calls
    return _plain.provider_of(request)  # type: ignore[no-any-return]


def _refuse_resend(scope: Any, request: Any) -> None:
    """Inside a governed attempt, raise a failed request's resend's refusal instead of sending."""
    if scope is None or _resends is None or not owns_retries():
        return
    refused = _resends.refusal(scope, request)
    if refused is not None:
        raise refused


def _trace_connections(client: Any, request: Any, scope: Any, is_async: bool) -> Any:
    """Watch the connection retries of a transport that makes them (``HTTPTransport(retries=…)``)."""
    try:
        transport = client._transport_for_url(request.url) if client._mounts else client._transport
        if not getattr(getattr(transport, "_pool", None), "_retries", 0):
            return _NOT_TRACED
    except Exception:  # noqa: BLE001 - a transport we do not know: nothing to watch
        return _NOT_TRACED
    resends = _load_resends()

    def on_retry(error: BaseException, latency_ms: int) -> None:
        if scope is not None:
            if owns_retries():
                raise error  # the connection's own error, now final: the governor retries
            return
        _report(observer, request, None, error, latency_ms)

    return resends.trace_connections(request, on_retry, is_async)


def _load_resends() -> Any:
    global _resends
    if _resends is None:
        from . import http_resends

        _resends = http_resends
    return _resends


def _after(
    request: Any, response: Any, error: BaseException | None, started: float, scope: Any = None
) -> Any:
    """Note one request; inside a governed attempt, keep the client from retrying it."""
    latency_ms = int((time.perf_counter() - started) * 1000)
    if scope is not None:
        if not owns_retries():
            return response
        if error is None and response.status_code < 400:
            return response
        resends = _load_resends()
        resends.note_failure(scope, request, response, error, latency_ms)
        if error is not None:
            final = resends.client_final_error(request, error)
            if final is not None:
                raise final from error
            return None  # not a stainless client: the caller re-raises ``error``
        resends.refuse_client_retry(response)
        return response
    _report(observer, request, response, error, latency_ms)
    return response


#: :mod:`.http_attempts`, loaded with the first reported request and kept: an ``import``
#: statement per request would run the import machinery on every observed call.
_ATTEMPTS: Any = None


def _load_attempts() -> Any:
    global _ATTEMPTS
    from . import http_attempts

    _ATTEMPTS = http_attempts
    return http_attempts


def _report(
    watcher: Observer | None,
    request: Any,
    response: Any,
    error: BaseException | None,
    latency_ms: int,
) -> None:
    """Hand one request to the adapter's recorder or the observed operation in progress."""
    try:
        recorder = attempt_scope.recorded.get()
        if recorder:
            if recorder is True:
                return  # an adapter records the call, without counting its requests
            attempts = _ATTEMPTS or _load_attempts()
            recorder.physical(
                attempts.of_exception(request, error, latency_ms)
                if error is not None
                else attempts.of_response(request, response, latency_ms)
            )
            return
        operation = attempt_scope.operation.get()
        if operation is None or watcher is None:
            return  # only requests of a provider call
    except Exception:  # noqa: BLE001 - observing never changes the call
        return
    _to_operation(watcher, operation, request, response, error, latency_ms=latency_ms)


def _to_operation(
    watcher: Observer,
    operation: Any,
    request: Any,
    response: Any,
    error: BaseException | None,
    started: float = 0.0,
    latency_ms: int | None = None,
) -> None:
    """Report one request of an observed call (sent at ``started``, or taking ``latency_ms``):
    an answer as such (the observer builds what it needs of it), a failure as a
    :class:`~.http_attempts.Physical`."""
    if latency_ms is None:
        latency_ms = int((time.perf_counter() - started) * 1000)
    try:
        if error is None and int(response.status_code) < 400:
            watcher.answered(operation, request, response, latency_ms)
            return
        attempts = _ATTEMPTS or _load_attempts()
        watcher.physical(
            operation,
            attempts.of_exception(request, error, latency_ms)
            if error is not None
            else attempts.of_response(request, response, latency_ms),
        )
    except Exception:  # noqa: BLE001 - observing never changes the call
        return
