"""The error type of an HTTP status: the one table the provider hook and the sanitizer share.

The hook types a provider's response (:mod:`.http_attempts`), the sanitizer an exception
carrying a status (:mod:`.sanitizer`); both import this, so a status is the same class on
both roads. It lives apart from both because they import each other's helpers lazily (a
direct import would close a cycle) and imports nothing but the taxonomy.
"""

from __future__ import annotations

from retrylens.schemas.taxonomy import ErrorType


def status_type(status: int) -> ErrorType | None:
    """The error type of an HTTP status, or ``None`` for a success (below 400)."""
    if status < 400:
        return None
    if status == 429:
        return ErrorType.RATE_LIMIT
    if status in (408, 504):
        return ErrorType.TIMEOUT
    if status >= 500:
        return ErrorType.SERVER_ERROR
    if status == 413:
        return ErrorType.CONTEXT_OVERFLOW
    return ErrorType.VALIDATION
