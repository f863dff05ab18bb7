"""See every request a provider client sends: a hook on httpx's and httpx2's send path.

Provider clients retry by themselves (openai and anthropic: ``max_retries=2``), inside
one call, where no retry library sees it. This hook patches ``Client.send`` and
``AsyncClient.send`` of ``httpx`` and ``httpx2`` (openai 3.x and anthropic 2.x send
through httpx2) the way OpenTelemetry instrumentors patch a library: once, for the
modules imported now or later (an import hook patches them as they load), reversibly
(:func:`uninstall`), and a request outside any governed or observed call costs one
context-variable read.

Inside a governed attempt (:mod:`.attempt_scope`) the governor owns the retrying: a
stainless client's call runs with ``max_retries=0`` (its ``request`` method is wrapped),
and, for a client whose calls we cannot reach, a failed response gets ``x-should-retry: false`` (which every stainless-generated client —
openai, anthropic and their kin — obeys; the server's own value is kept on
``response.extensions`` for the classifier) and a timeout or connection error is raised
at once as the client's own final error (``APITimeoutError`` / ``APIConnectionError``,
exactly what it raises with ``max_retries=0``). So each request is one governed attempt:
the policy's attempt budget bounds the requests, and the fleet budget and breaker see
every one. ``RETRYLENS_PROVIDER_RETRIES=client`` leaves the retries to the client.

A client on httpx that is not stainless-generated retries where no option reaches: a
hand-written loop resending a failed request, or a transport retrying its connections.
Inside a governed attempt such a resend is not sent and a connection retry is not made:
the earlier failure is raised and the governor decides (:mod:`.http_resends`).

Under :func:`retrylens.sdk.observe` (no governor) the hook reports each request to the
observer instead, grouped into one operation per client call (the stainless
``request`` method is wrapped for that; for other clients see :mod:`.plain_calls`: a
known provider host or :func:`~retrylens.sdk.observing.model_call`); what the call
returns or raises is untouched.
"""

from __future__ import annotations

import _thread
import functools
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Protocol

from . import attempt_scope

if TYPE_CHECKING:
    from . import http_attempts

_HTTP_MODULES = ("httpx", "httpx2")
_CLIENT_RETRIES_ENV = "RETRYLENS_PROVIDER_RETRIES"
_lock = _thread.allocate_lock()
_patched: list[tuple[type, str, Any]] = []  # (class, attribute, original) to undo
_finder: _PostImportFinder | None = None
_observer: Observer | None = None


class Observer(Protocol):
    """What the hook reports to outside governed calls (:mod:`.observing` implements it)."""

    def begin(self, client: str) -> Any: ...
    def physical(self, operation: Any, request: http_attempts.Physical) -> None: ...
    def end(self, operation: Any, error: BaseException | None, result: Any = None) -> None: ...


def install(observer: Observer | None = None) -> None:
    """Patch the send paths (idempotent); ``observer`` also gets the requests of ungoverned calls."""
    global _finder, _observer
    with _lock:
        if observer is not None:
            _observer = observer
        if _finder is not None:
            return
        _finder = _PostImportFinder()
        sys.meta_path.insert(0, _finder)
        for name in list(sys.modules):
            module = sys.modules.get(name)
            if module is not None and _FOR(name):
                _patch_module(name, module)


def uninstall() -> None:
    """Undo every patch and the import hook; calls made from now on are the library's own."""
    global _finder, _observer
    with _lock:
        if _finder is not None and _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        _finder = None
        if _plain is not None and _observer is not None:
            _plain.close_open()
        _observer = None
        while _patched:
            cls, attribute, original = _patched.pop()
            setattr(cls, attribute, original)


def installed() -> bool:
    return _finder is not None


def stop_observing() -> None:
    global _observer
    observer, _observer = _observer, None
    if _plain is not None and observer is not None:
        _plain.close_open()  # the operations whose last request failed end as failed


def _owns_retries() -> bool:
    return os.environ.get(_CLIENT_RETRIES_ENV, "governor").strip().lower() != "client"


def _FOR(name: str) -> bool:  # noqa: N802 - reads as "is this module one to patch"
    return name in _HTTP_MODULES or name.endswith("._base_client")


def _patch_module(name: str, module: Any) -> None:
    if name in _HTTP_MODULES:
        for cls_name, wrap in (("Client", _wrap_send), ("AsyncClient", _wrap_asend)):
            cls = getattr(module, cls_name, None)
            if cls is not None:
                _patch(cls, "send", wrap)
        return
    # a stainless-generated client's base: one operation per call of ``request``
    for cls_name, wrap in (("SyncAPIClient", _wrap_request), ("AsyncAPIClient", _wrap_arequest)):
        cls = getattr(module, cls_name, None)
        if cls is not None and callable(cls.__dict__.get("request")):
            _patch(cls, "request", wrap)


def _patch(cls: type, attribute: str, wrap: Any) -> None:
    original = cls.__dict__[attribute]
    if getattr(original, "__retrylens_original__", None) is not None:
        return  # patched already
    wrapper = wrap(original)
    wrapper.__retrylens_original__ = original
    setattr(cls, attribute, wrapper)
    _patched.append((cls, attribute, original))


class _PostImportFinder:
    """Patches a watched module right after it is executed, whenever it is first imported.

    A meta path finder (the protocol needs only ``find_spec``) that finds nothing itself:
    it asks the finders after it and wraps the found loader's ``exec_module``.
    """

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if not _FOR(fullname):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return None

        def exec_and_patch(module: Any) -> None:
            exec_module(module)
            with _lock:
                if _finder is not None:
                    _patch_module(fullname, module)

        loader.exec_module = exec_and_patch  # this spec's own loader instance
        return spec


# -- the send path ----------------------------------------------------------------------------
_resends: Any = None  # the http_resends module, loaded with the first failed governed request
_plain: Any = None  # the plain_calls module, loaded with the first request under observe()
_NOT_TRACED = object()


def _wrap_send(original: Any) -> Any:
    @functools.wraps(original)
    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        scope = attempt_scope.current.get()
        if scope is None:
            recorder = attempt_scope.recorded.get()
            if recorder:  # an adapter's attempt: its recorder counts the client's retries
                if recorder is True:
                    return original(self, request, *args, **kwargs)
                return send_seen(self, request, *args, **kwargs)
            observer = _observer
            if observer is None:
                return original(self, request, *args, **kwargs)
            if _idle():
                client = _plain_client(request)
                if client is None:
                    return original(self, request, *args, **kwargs)
                return _plain.send(observer, client, send_seen, self, request, args, kwargs)
        return send_seen(self, request, *args, **kwargs)

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


def _wrap_asend(original: Any) -> Any:
    @functools.wraps(original)
    async def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        scope = attempt_scope.current.get()
        if scope is None:
            recorder = attempt_scope.recorded.get()
            if recorder:  # an adapter's attempt: its recorder counts the client's retries
                if recorder is True:
                    return await original(self, request, *args, **kwargs)
                return await send_seen(self, request, *args, **kwargs)
            observer = _observer
            if observer is None:
                return await original(self, request, *args, **kwargs)
            if _idle():
                client = _plain_client(request)
                if client is None:
                    return await original(self, request, *args, **kwargs)
                return await _plain.asend(observer, client, send_seen, self, request, args, kwargs)
        return await send_seen(self, request, *args, **kwargs)

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


def _idle() -> bool:
    """No provider call is being observed in this context."""
    return attempt_scope.operation.get() is None


def _plain_client(request: Any) -> str | None:
    """The provider a request outside any client call goes to (see :mod:`.plain_calls`)."""
    global _plain
    if _plain is None:
        from . import plain_calls

        _plain = plain_calls
    return _plain.provider_of(request)  # type: ignore[no-any-return]


def _refuse_resend(scope: Any, request: Any) -> None:
    """Inside a governed attempt, raise a failed request's resend's refusal instead of sending."""
    if scope is None or _resends is None or not _owns_retries():
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
            if _owns_retries():
                raise error  # the connection's own error, now final: the governor retries
            return
        _report(_observer, request, None, error, latency_ms)

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
        if not _owns_retries():
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
    _report(_observer, request, response, error, latency_ms)
    return response


# -- one operation per client call (observation without a governor) -------------------------
#: :mod:`.http_attempts`, loaded with the first reported request and kept: an ``import``
#: statement per request would run the import machinery on every observed call.
_ATTEMPTS: Any = None


def _load_attempts() -> Any:
    global _ATTEMPTS
    from . import http_attempts

    _ATTEMPTS = http_attempts
    return http_attempts


def _op_var() -> Any:
    return attempt_scope.operation


def _report(
    observer: Observer | None,
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
            report = recorder.physical
        else:
            operation = _op_var().get()
            if operation is None or observer is None:
                return  # only requests of a provider call
            report = functools.partial(observer.physical, operation)
        attempts = _ATTEMPTS or _load_attempts()
        physical = (
            attempts.of_exception(request, error, latency_ms)
            if error is not None
            else attempts.of_response(request, response, latency_ms)
        )
        report(physical)
    except Exception:  # noqa: BLE001 - observing never changes the call
        return


def _wrap_request(original: Any) -> Any:
    @functools.wraps(original)
    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        if attempt_scope.current.get() is not None:
            try:
                return original(self, *_without_retries(args), **kwargs)
            except Exception as error:
                refused = _refused_cause(error)
                if refused is None:
                    raise
                raise refused from None
        recorder = attempt_scope.recorded.get()
        if recorder and recorder is not True:  # an adapter's model call: the governor retries
            return recorder.request(original, self, args, kwargs)
        observer = _observer
        if observer is None or recorder:  # an adapter records this call
            return original(self, *args, **kwargs)
        var = _op_var()
        if var.get() is not None:
            return original(self, *args, **kwargs)
        operation = _begin(observer, self)
        token = var.set(operation)
        try:
            result = original(self, *args, **kwargs)
        except BaseException as error:
            _end(observer, operation, error, None)
            raise
        finally:
            var.reset(token)
        _end(observer, operation, None, result)
        return result

    return request


def _wrap_arequest(original: Any) -> Any:
    @functools.wraps(original)
    async def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        if attempt_scope.current.get() is not None:
            try:
                return await original(self, *_without_retries(args), **kwargs)
            except Exception as error:
                refused = _refused_cause(error)
                if refused is None:
                    raise
                raise refused from None
        recorder = attempt_scope.recorded.get()
        if recorder and recorder is not True:  # an adapter's model call: the governor retries
            return await recorder.arequest(original, self, args, kwargs)
        observer = _observer
        if observer is None or recorder:  # an adapter records this call
            return await original(self, *args, **kwargs)
        var = _op_var()
        if var.get() is not None:
            return await original(self, *args, **kwargs)
        operation = _begin(observer, self)
        token = var.set(operation)
        try:
            result = await original(self, *args, **kwargs)
        except BaseException as error:
            _end(observer, operation, error, None)
            raise
        finally:
            var.reset(token)
        _end(observer, operation, None, result)
        return result

    return request


def _refused_cause(error: BaseException) -> BaseException | None:
    """The refused resend a stainless client wrapped as its connection error, if it was one."""
    cause = error.__cause__
    if _resends is not None and isinstance(cause, _resends.ResendRefused):
        return cause
    return None


def _without_retries(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``request(cast_to, options, …)``'s arguments with ``max_retries=0`` on the options.

    Inside a governed attempt the client makes one request per call whatever fails
    (anthropic retries a connection error whatever its type), as with ``max_retries=0``;
    options of an unexpected shape pass unchanged (the send hook still refuses retries).
    """
    if not _owns_retries() or len(args) < 2:
        return args
    try:
        options = args[1].model_copy(update={"max_retries": 0})
    except Exception:  # noqa: BLE001 - not the options we know
        return args
    return (args[0], options, *args[2:])


def _begin(observer: Observer, client: Any) -> Any:
    try:
        return observer.begin(type(client).__module__.partition(".")[0])
    except Exception:  # noqa: BLE001
        return None


def _end(observer: Observer, operation: Any, error: BaseException | None, result: Any) -> None:
    if operation is None:
        return
    try:
        observer.end(operation, error, result)
    except Exception:  # noqa: BLE001 - observing never changes the call
        return
