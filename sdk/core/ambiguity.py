"""Where a failure happened: before the request could reach the other side, or after.

A side effect with no idempotency key and no contract may be repeated only when its
failure happened *before* anything was sent (the connection was refused, the name did
not resolve, no connection could be opened in time): the other side cannot have acted.
Any failure *after* the request may have reached it — a read or write timeout, a reset
or aborted connection, a broken pipe, a server that hung up without an answer, a
cancellation (a deadline's or anyone's) while the call was in flight — leaves the effect
ambiguous: it may have happened. So the question is not the failure's type but its
place, read from the exception and the chain of exceptions it wraps (``__cause__``,
``__context__``, and the errors that urllib3 and requests keep in ``args`` or
``reason``), by class name, so that no client library is imported to ask.

An exception that says neither (an application's own ``ValueError``, an HTTP error
status: the other side answered) is not ambiguous: the tool or the server decided.
A bare timeout or connection error with nothing behind it is: nobody can tell where.
"""

from __future__ import annotations

import errno
from typing import Any

#: Failures raised before a request left: nothing can have happened on the other side.
BEFORE = frozenset(
    {
        "ConnectError",  # httpx: the connection could not be opened
        "ConnectTimeout",  # httpx, requests: no connection within the timeout
        "ConnectTimeoutError",  # urllib3
        "ConnectionTimeoutError",  # aiohttp: the connection (not the answer) timed out
        "PoolTimeout",  # httpx: no free connection; nothing sent
        "NewConnectionError",  # urllib3
        "NameResolutionError",  # urllib3
        "ClientConnectorError",  # aiohttp: the connector failed (refused, DNS)
        "ClientConnectorDNSError",
        "ConnectionRefusedError",
        "gaierror",  # socket: the name did not resolve
        "UnsupportedProtocol",  # httpx: nothing sent
        "InvalidURL",
        "MissingSchema",
    }
)

#: Failures raised after a request may have reached the other side.
AFTER = frozenset(
    {
        "ReadTimeout",  # httpx, requests
        "WriteTimeout",  # httpx
        "ReadTimeoutError",  # urllib3
        "ReadError",  # httpx
        "WriteError",  # httpx
        "RemoteProtocolError",  # httpx: the server hung up without an answer
        "ProtocolError",  # urllib3: ('Connection aborted.', ...)
        "ChunkedEncodingError",  # requests
        "IncompleteRead",  # http.client
        "RemoteDisconnected",  # http.client
        "ConnectionResetError",
        "ConnectionAbortedError",
        "BrokenPipeError",
        "ServerDisconnectedError",  # aiohttp
        "ServerTimeoutError",  # aiohttp: socket read timeout
        "SocketTimeoutError",  # aiohttp
        "ClientPayloadError",  # aiohttp
        "CancelledError",  # asyncio: cut while in flight (a deadline's or anyone's)
    }
)

#: The same, told by an ``OSError``'s number when its class is a library's wrapper.
BEFORE_ERRNOS = frozenset({errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH})
AFTER_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED})

_MAX_LINKS = 16  # a chain is short; a cycle or a pathological one must not hang the decision


def may_have_reached(error: BaseException) -> bool:
    """Whether ``error`` may have happened after the request reached the other side.

    The first exception along the chain (outermost first, each one's cause before what it
    wraps) whose class says where decides; a chain that never says is ambiguous only if
    one of its errors is a timeout, a cancellation or a connection error.
    """
    chain = _chain(error)
    for link in chain:
        for cls in type(link).__mro__:  # the most specific class that says decides
            name = cls.__name__
            if name in BEFORE or _before_by_message(name, link):
                return False
            if name in AFTER:
                return True
        code = getattr(link, "errno", None)  # a wrapper class (aiohttp's ClientOSError) keeps it
        if code in BEFORE_ERRNOS:
            return False
        if code in AFTER_ERRNOS:
            return True
    return any(_unplaced(link) for link in chain)


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and the errors it wraps, breadth-first, each once."""
    seen: list[BaseException] = []
    queue: list[Any] = [error]
    while queue and len(seen) < _MAX_LINKS:
        link = queue.pop(0)
        if not isinstance(link, BaseException) or any(link is s for s in seen):
            continue
        seen.append(link)
        queue.append(link.__cause__)
        if not link.__suppress_context__:
            queue.append(link.__context__)
        queue.append(getattr(link, "reason", None))  # urllib3 MaxRetryError
        queue.extend(a for a in link.args if isinstance(a, BaseException))
    return seen


def _before_by_message(name: str, link: BaseException) -> bool:
    """Older aiohttp raise ``ServerTimeoutError`` for a connect timeout too; its text says so."""
    return name == "ServerTimeoutError" and str(link).startswith("Connection timeout")


def _unplaced(error: BaseException) -> bool:
    """A failure that does not say where: ambiguous if it is a timeout (a class named so, or
    a :class:`~retrylens.sdk.text.sanitizer.Failure` a user typed ``timeout``) or a connection
    error. (A cancellation always says: ``CancelledError`` is in :data:`AFTER`.)"""
    kind = type(error)
    if issubclass(kind, TimeoutError | ConnectionError) or "Timeout" in kind.__name__:
        return True
    return getattr(error, "error_type", None) == "timeout"
