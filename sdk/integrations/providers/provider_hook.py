"""See every request a provider client sends: a hook on httpx's and httpx2's send path.

Provider clients retry by themselves (openai and anthropic: ``max_retries=2``), inside
one call, where no retry library sees it. This hook patches ``Client.send`` and
``AsyncClient.send`` of ``httpx`` and ``httpx2`` (openai 3.x and anthropic 2.x send
through httpx2) the way OpenTelemetry instrumentors patch a library: once, for the
modules imported now or later (an import hook patches them as they load), reversibly
(:func:`uninstall`), and a request outside any governed or observed call costs one
context-variable read.

Inside a governed attempt (:mod:`~retrylens.sdk.core.attempt_scope`) the governor owns the retrying: a
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
known provider host or :func:`~retrylens.sdk.integrations.providers.observing.model_call`); what the call
returns or raises is untouched.

litellm retries around its client calls (``num_retries``): its ``completion`` and
``acompletion`` are wrapped too once ``litellm`` is imported, so that under ``observe()``
one litellm call is one operation whatever its clients and retries send
(:mod:`~retrylens.sdk.integrations.litellm`).

This module installs and removes the hook; what it does per request is
:mod:`.provider_send`, per stainless client call :mod:`.provider_calls`, per litellm call
:mod:`~retrylens.sdk.integrations.litellm` (each loads with the first module it patches, or with
:func:`install` given an observer).
"""

from __future__ import annotations

import _thread
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .provider_send import Observer

_HTTP_MODULES = ("httpx", "httpx2")
_LITELLM = "litellm"  # its completion functions, see :mod:`~retrylens.sdk.integrations.litellm`
_lock = _thread.allocate_lock()
_patched: list[tuple[Any, str, Any]] = []  # (class or module, attribute, original) to undo
_finder: _PostImportFinder | None = None
_sending: Any = None  # the provider_send module, once loaded


def _send() -> Any:
    """:mod:`.provider_send`, loaded when first needed (an app with no HTTP client never is)."""
    global _sending
    if _sending is None:
        from . import provider_send

        _sending = provider_send
    return _sending


def install(observer: Observer | None = None) -> None:
    """Patch the send paths (idempotent); ``observer`` also gets the requests of ungoverned calls."""
    global _finder
    with _lock:
        if observer is not None:
            _send().set_observer(observer)
        if _finder is not None:
            _patch_overrides()  # an instrumentation may have wrapped a client since
            return
        _finder = _PostImportFinder()
        sys.meta_path.insert(0, _finder)
        for name in list(sys.modules):
            module = sys.modules.get(name)
            if module is not None and _FOR(name):
                _patch_module(name, module)


def uninstall() -> None:
    """Undo every patch and the import hook; calls made from now on are the library's own."""
    global _finder
    with _lock:
        if _finder is not None and _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        _finder = None
        stop_observing()
        while _patched:
            cls, attribute, original = _patched.pop()
            setattr(cls, attribute, original)


def installed() -> bool:
    return _finder is not None


def stop_observing() -> None:
    """Report no more requests (the operations whose last request failed end as failed)."""
    if _sending is not None:
        _sending.set_observer(None)


def _FOR(name: str) -> bool:  # noqa: N802 - reads as "is this module one to patch"
    return name in _HTTP_MODULES or name.endswith("._base_client") or name == _LITELLM


def _patch_module(name: str, module: Any) -> None:
    if name == _LITELLM:  # its own retries around its client calls: one operation per call
        from .. import litellm as litellm_calls

        for attribute, is_async in litellm_calls.WRAPPED:
            if callable(module.__dict__.get(attribute)):
                wrap = litellm_calls.wrap_acompletion if is_async else litellm_calls.wrap_completion
                _patch(module, attribute, wrap)
        return
    if name in _HTTP_MODULES:
        send = _send()
        for cls_name, wrap in (("Client", send.wrap_send), ("AsyncClient", send.wrap_asend)):
            cls = getattr(module, cls_name, None)
            if cls is not None:
                _patch(cls, "send", wrap)
        return
    # a stainless-generated client's base: one operation per call of ``request``
    from . import provider_calls

    for cls_name, wrap in (
        ("SyncAPIClient", provider_calls.wrap_request),
        ("AsyncAPIClient", provider_calls.wrap_arequest),
    ):
        cls = getattr(module, cls_name, None)
        if cls is not None and callable(cls.__dict__.get("request")):
            _patch(cls, "request", wrap)
            _patch_subclass_requests(cls, wrap)


def _patch_overrides() -> None:
    """Patch the ``request`` a client class defines over its stainless base's, in every
    loaded client module (see :func:`_patch_subclass_requests`)."""
    from . import provider_calls

    for name in list(sys.modules):
        module = sys.modules.get(name)
        if module is None or not name.endswith("._base_client"):
            continue
        for cls_name, wrap in (
            ("SyncAPIClient", provider_calls.wrap_request),
            ("AsyncAPIClient", provider_calls.wrap_arequest),
        ):
            cls = getattr(module, cls_name, None)
            if cls is not None:
                _patch_subclass_requests(cls, wrap)


def _patch_subclass_requests(base: type, wrap: Any) -> None:
    """A client class's own ``request`` (``openai.OpenAI.request``), wrapped too.

    An instrumentation that ran before us (openinference's ``instrument()`` wraps
    ``OpenAI.request``, and its ``uninstrument()`` leaves the function it saw there) holds
    the base's unpatched ``request``: the client's calls would never reach our wrapper of
    the base. Wrapping what the class defines puts ours outside theirs; the descriptor is
    bound as attribute access would bind it (a wrapt wrapper needs its instance)."""
    pending = list(base.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        own = cls.__dict__.get("request")
        if own is None or getattr(own, "__retrylens_original__", None) is not None:
            continue
        _patch(cls, "request", lambda original: wrap(_bound(original)))


def _bound(descriptor: Any) -> Any:
    """A function calling ``descriptor`` (from a class's ``__dict__``) bound to ``self``."""

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return descriptor.__get__(self, type(self))(*args, **kwargs)

    return call


def _patch(cls: Any, attribute: str, wrap: Any) -> None:
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
