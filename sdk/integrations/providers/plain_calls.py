"""Observed model calls of clients that are not stainless-generated: which requests, grouped how.

Under :func:`retrylens.sdk.observe` a stainless client's call (openai, anthropic…) is one
operation by construction. A plain ``httpx`` / ``httpx2`` request has no such boundary,
and most HTTP traffic of an agent is not a model call, so the rule is:

* inside :func:`retrylens.sdk.integrations.providers.observing.model_call` every request is a physical attempt
  of that one operation (any host);
* outside one, only a request to a **known provider host** is observed (OpenAI,
  Anthropic, Google Gemini and Vertex AI, Azure OpenAI, AWS Bedrock, Mistral, Cohere,
  Groq, Together, Fireworks, DeepSeek, OpenRouter, Perplexity, xAI, plus the hosts named
  in ``RETRYLENS_PROVIDER_HOSTS``, comma-separated). Its operation is the request and its
  resends: a request to the same method, host and path sent, in the same context, after
  it failed continues the operation; a success ends it; a failed one stays open until the
  next request of that context goes elsewhere, observing stops, or the process exits, and
  then ends as failed (the client gave up). Every other request is not counted.

Nothing about the request changes: the response or exception reaches the caller as is.
"""

from __future__ import annotations

import _thread
import atexit
import contextvars
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...core import attempt_scope
from .operations import begin, end

_KNOWN: dict[str, str] = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "generativelanguage.googleapis.com": "google",
    "api.mistral.ai": "mistral",
    "api.cohere.com": "cohere",
    "api.cohere.ai": "cohere",
    "api.groq.com": "groq",
    "api.together.xyz": "together",
    "api.together.ai": "together",
    "api.fireworks.ai": "fireworks",
    "api.deepseek.com": "deepseek",
    "openrouter.ai": "openrouter",
    "api.perplexity.ai": "perplexity",
    "api.x.ai": "xai",
}
_SUFFIXES: tuple[tuple[str, str], ...] = (
    (".openai.azure.com", "azure-openai"),
    (".services.ai.azure.com", "azure-ai"),
    ("-aiplatform.googleapis.com", "vertex-ai"),
)
_HOSTS_ENV = "RETRYLENS_PROVIDER_HOSTS"
_extra: tuple[str, frozenset[str]] = ("", frozenset())  # the env value, parsed
#: a failed operation older than this is not continued by a resend: the client gave up
STALE_S = 600.0


def provider_of(request: Any) -> str | None:
    """The provider ``request`` goes to, or ``None`` for traffic that is not a model call."""
    try:
        host = str(request.url.host).lower()
    except Exception:  # noqa: BLE001
        return None
    name = _KNOWN.get(host)
    if name is not None:
        return name
    for suffix, provider in _SUFFIXES:
        if host.endswith(suffix):
            return provider
    if host.startswith("bedrock-runtime.") and host.endswith(".amazonaws.com"):
        return "bedrock"
    return host if host in _extra_hosts() else None


def _extra_hosts() -> frozenset[str]:
    global _extra
    raw = os.environ.get(_HOSTS_ENV, "")
    if raw != _extra[0]:
        _extra = (raw, frozenset(h.strip().lower() for h in raw.split(",") if h.strip()))
    return _extra[1]


@dataclass(slots=True, eq=False)
class _Open:
    """An operation whose last request failed: the client may still resend it."""

    observer: Any
    operation: Any
    endpoint: tuple[str, str, str]
    at: float


_open: contextvars.ContextVar[_Open | None] = contextvars.ContextVar(
    "retrylens_open_provider_call", default=None
)
_every_open: set[_Open] = set()  # to end them when observing stops or the process exits
_lock = _thread.allocate_lock()
_exit_registered = False


def _operation_for(observer: Any, client: str, request: Any) -> tuple[Any, tuple[str, str, str]]:
    from .http_resends import endpoint

    key = endpoint(request)
    pending = _open.get()
    if pending is not None:
        _open.set(None)
        if (
            pending.observer is observer
            and pending.endpoint == key
            and time.monotonic() - pending.at < STALE_S
            and _forget(pending)
        ):
            return pending.operation, key  # the client's resend of a failed request
        _close(pending)
    return begin(observer, client), key


def _after(observer: Any, operation: Any, key: tuple[str, str, str], failed: bool) -> None:
    if operation is None:
        return
    if not failed:
        end(observer, operation, None, None)
        return
    pending = _Open(observer, operation, key, time.monotonic())
    global _exit_registered
    with _lock:
        _every_open.add(pending)
        if not _exit_registered:  # after the emitter's own: runs before it closes
            atexit.register(close_open)
            _exit_registered = True
    _open.set(pending)


def send(
    observer: Any,
    client: str,
    send_seen: Callable[..., Any],
    http: Any,
    request: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """``Client.send`` of a request to a provider, observed as (part of) an operation."""
    operation, key = _operation_for(observer, client, request)
    var = attempt_scope.operation
    token = var.set(operation)
    try:
        response = send_seen(http, request, *args, **kwargs)
    except Exception:
        _after(observer, operation, key, True)
        raise
    finally:
        var.reset(token)
    _after(observer, operation, key, _failed(response))
    return response


async def asend(
    observer: Any,
    client: str,
    send_seen: Callable[..., Any],
    http: Any,
    request: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """``AsyncClient.send``'s twin of :func:`send`."""
    operation, key = _operation_for(observer, client, request)
    var = attempt_scope.operation
    token = var.set(operation)
    try:
        response = await send_seen(http, request, *args, **kwargs)
    except Exception:
        _after(observer, operation, key, True)
        raise
    finally:
        var.reset(token)
    _after(observer, operation, key, _failed(response))
    return response


def _failed(response: Any) -> bool:
    try:
        return int(response.status_code) >= 400
    except Exception:  # noqa: BLE001
        return False


def _forget(pending: _Open) -> bool:
    with _lock:
        if pending not in _every_open:
            return False  # closed meanwhile (observing stopped)
        _every_open.discard(pending)
        return True


def _close(pending: _Open) -> None:
    if _forget(pending):
        end(pending.observer, pending.operation, _GaveUp(), None)


def close_open() -> None:
    """End every open failed operation as failed: its client sent nothing more."""
    with _lock:
        pending = list(_every_open)
        _every_open.clear()
    for each in pending:
        end(each.observer, each.operation, _GaveUp(), None)


class _GaveUp(Exception):  # noqa: N818 - what the client did, not an error kind
    """The client sent no further request after a failed one."""
