"""One physical HTTP request to a provider, typed the way RetryLens types a failed attempt.

:mod:`.provider_hook` sees every request a provider client sends; this module turns what
came back (a status and headers, or a transport exception) into a :class:`Physical`:
its error type in the closed taxonomy (:mod:`~retrylens.sdk.text.http_status`: ``rate_limit`` for 429 and
Anthropic's 529 "overloaded" — with ``code='overloaded'`` and status 529 —, ``timeout``
for 408/504 and client timeouts, ``server_error`` for other 5xx, ``network`` for
connection errors), what the server said of a retry
(``x-should-retry``) and how long it asked to wait (``retry-after-ms``, ``Retry-After``
in seconds or as an HTTP date). Broken headers are read as absent: typing never raises.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from retrylens.schemas.taxonomy import ErrorType

from ...text.http_status import status_type

#: statuses a stainless client (openai, anthropic, …) retries on its own
CLIENT_RETRIED_STATUSES = frozenset({408, 409, 429})
#: the response extension where the hook keeps the server's own ``x-should-retry``
SHOULD_RETRY_EXTENSION = "retrylens.x-should-retry"


@dataclass(frozen=True, slots=True)
class Physical:
    """What one request to a provider came to."""

    host: str
    method: str
    status: int | None
    error_type: ErrorType | None  # None: the request succeeded
    code: str = ""
    retry_after_ms: int | None = None
    should_retry: bool | None = None  # the server's x-should-retry, when it sent one
    resend_count: int = 0  # the client's x-stainless-retry-count: 0 for a first request
    latency_ms: int = 0
    message: str = ""
    path: str = ""  # the URL's path: a resend goes to the same method, host and path

    @property
    def failed(self) -> bool:
        return self.error_type is not None


def retry_after_ms(headers: Any) -> int | None:
    """The server's requested wait in ms: ``retry-after-ms`` first, then ``Retry-After``."""
    try:
        value = _get(headers, "retry-after-ms")
        if value is not None:
            ms = float(value)
            if ms == ms and 0 <= ms < 1e12:  # not NaN, not absurd
                return int(ms)
        value = _get(headers, "retry-after")
    except Exception:  # noqa: BLE001 - a broken header is an absent one
        return None
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = _http_date_seconds(str(value))
        if seconds is None:
            return None
    if seconds != seconds or not 0 <= seconds < 1e9:
        return None
    return int(seconds * 1000)


def _get(headers: Any, name: str) -> Any:
    """A header from httpx's case-insensitive headers or a plain dict in any common case."""
    value = headers.get(name)
    if value is None and isinstance(headers, dict):
        value = headers.get(name.title()) or headers.get(name.upper())
    return value


def _http_date_seconds(value: str) -> float | None:
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def should_retry(headers: Any) -> bool | None:
    """The server's ``x-should-retry`` (a stainless convention), or ``None``."""
    try:
        value = headers.get("x-should-retry")
    except Exception:  # noqa: BLE001
        return None
    if value == "true":
        return True
    if value == "false":
        return False
    return None


def resend_count(headers: Any) -> int:
    """How many times the client had already sent this request (``x-stainless-retry-count``)."""
    try:
        return max(0, int(headers.get("x-stainless-retry-count") or 0))
    except (TypeError, ValueError):
        return 0


def of_response(request: Any, response: Any, latency_ms: int) -> Physical:
    """A request that got a response (any status)."""
    status = int(response.status_code)
    if status < 400:  # the common case: nothing to read from the headers
        return Physical(
            host_of(request),
            _method(request),
            status,
            None,
            latency_ms=latency_ms,
            path=_path(request),
        )
    headers = response.headers
    error_type = status_type(status)
    code = "overloaded" if status == 529 else (f"http_{status}" if error_type else "")
    kept = getattr(response, "extensions", {}).get(SHOULD_RETRY_EXTENSION, _UNSET)
    return Physical(
        host=host_of(request),
        method=_method(request),
        status=status,
        error_type=error_type,
        code=code,
        retry_after_ms=retry_after_ms(headers) if error_type else None,
        should_retry=should_retry(headers) if kept is _UNSET else kept,
        resend_count=resend_count(request.headers),
        latency_ms=latency_ms,
        message=f"HTTP {status}" if error_type else "",
        path=_path(request),
    )


def of_exception(request: Any, error: BaseException, latency_ms: int) -> Physical:
    """A request that got no response: a timeout or a connection error."""
    names = {cls.__name__ for cls in type(error).__mro__}
    timeout = "TimeoutException" in names or isinstance(error, TimeoutError)
    return Physical(
        host=host_of(request),
        method=_method(request),
        status=None,
        error_type=ErrorType.TIMEOUT if timeout else ErrorType.NETWORK,
        code=type(error).__name__,
        resend_count=resend_count(request.headers),
        latency_ms=latency_ms,
        message=type(error).__name__,
        path=_path(request),
    )


_UNSET = object()


def _method(request: Any) -> str:
    try:
        return str(request.method)
    except Exception:  # noqa: BLE001
        return ""


def host_of(request: Any) -> str:
    """The host ``request`` goes to (``''`` if unreadable): a provider call's goal names it."""
    try:
        return str(request.url.host)
    except Exception:  # noqa: BLE001
        return ""


def _path(request: Any) -> str:
    try:
        return str(request.url.path)
    except Exception:  # noqa: BLE001
        return ""
