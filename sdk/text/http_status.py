"""The error type of an HTTP status: the one table the provider hook and the sanitizer share.

The hook types a provider's response (:mod:`~retrylens.sdk.integrations.providers.http_attempts`), the sanitizer an exception
carrying a status (:mod:`.sanitizer`); both import this, so a status is the same class on
both roads. It lives apart from both because they import each other's helpers lazily (a
direct import would close a cycle) and imports nothing but the taxonomy.

Anthropic's 529 "overloaded" is ``rate_limit``, not ``server_error``: the provider is out
of capacity and asks its clients to back off, which is what a 429 asks and what the
rate-limit handling does (its own class cap, backoff honouring ``Retry-After``, counted as
noise by failure grouping). So per-class caps and analytics tell it from other 5xx without
a new value in the closed taxonomy (which would be a schema change for every reader); the
status 529 (and the code ``overloaded`` or ``OverloadedError``) tells it from a 429.
"""

from __future__ import annotations

from retrylens.schemas.taxonomy import ErrorType


def status_type(status: int) -> ErrorType | None:
    """The error type of an HTTP status, or ``None`` for a success (below 400)."""
    if status < 400:
        return None
    if status in (429, 529):  # 529: Anthropic's "overloaded", a request to back off as a 429 is
        return ErrorType.RATE_LIMIT
    if status in (408, 504):
        return ErrorType.TIMEOUT
    if status >= 500:
        return ErrorType.SERVER_ERROR
    if status == 413:
        return ErrorType.CONTEXT_OVERFLOW
    return ErrorType.VALIDATION
