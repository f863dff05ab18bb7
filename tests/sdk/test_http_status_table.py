"""One table types an HTTP status, wherever RetryLens meets it.

The provider hook types a request from its response's status (:mod:`retrylens.sdk.integrations.providers.http_attempts`),
the sanitizer types an exception that carries a status (an ``APIStatusError``, an
``httpx.HTTPStatusError``): both read :mod:`retrylens.sdk.text.http_status`, so a status can
never be one class on one road and another on the other.
"""

from __future__ import annotations

import httpx
import pytest

from retrylens.schemas import ErrorType
from retrylens.sdk.integrations.providers import http_attempts
from retrylens.sdk.text import http_status
from retrylens.sdk.text.sanitizer import classify

REQUEST = httpx.Request("POST", "https://api.example.test/v1/chat/completions")


def _response(status: int) -> httpx.Response:
    return httpx.Response(status, request=REQUEST)


@pytest.mark.parametrize("status", range(100, 1000))
def test_the_hook_and_the_sanitizer_type_every_status_from_the_same_table(status: int) -> None:
    expected = http_status.status_type(status)
    physical = http_attempts.of_response(REQUEST, _response(status), latency_ms=1)
    assert physical.error_type == expected
    if status >= 400:
        error = httpx.HTTPStatusError("failed", request=REQUEST, response=_response(status))
        assert classify(error).error_type == expected


def test_the_table_is_the_one_both_modules_use() -> None:
    assert http_attempts.status_type is http_status.status_type
    assert http_status.status_type(200) is None
    assert http_status.status_type(429) == ErrorType.RATE_LIMIT
    assert http_status.status_type(503) == ErrorType.SERVER_ERROR
    assert http_status.status_type(529) == ErrorType.RATE_LIMIT  # Anthropic's "overloaded"
    assert http_status.status_type(504) == ErrorType.TIMEOUT
    assert http_status.status_type(413) == ErrorType.CONTEXT_OVERFLOW
    assert http_status.status_type(404) == ErrorType.VALIDATION
