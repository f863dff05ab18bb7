"""Every failure is typed as its status, its class's name or its text says, and the message
on the event is redacted and cut to the schema's limit with any secret at the edge whole.

Read on the ``attempt_failed`` event a governor with default settings emits (flushed and
parsed back), for exceptions as client libraries raise them.
"""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime

import pytest

from retrylens.schemas import EventKind, RetryEvent
from retrylens.schemas.limits import MAX_ERROR_MESSAGE_CHARS
from retrylens.sdk import Governor
from retrylens.sdk.text.sanitizer import Failure, classify, redact
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)


def _failed_event(exc: BaseException) -> RetryEvent:
    """The ``attempt_failed`` event of a call whose first attempt raises ``exc``."""

    def work(attempt) -> str:  # noqa: ANN001
        if attempt.number == 1:
            raise exc
        return "ok"

    with capture_events() as captured:
        gov = Governor.with_virtual_time(start=START, rng=random.Random(7), emit=captured.emit)
        try:
            gov.call(work, goal="look the order up", agent="a")
        except Exception:  # noqa: BLE001, S110 - a class that is not retried stops the task
            pass
        (failed,) = captured.of_kind(EventKind.ATTEMPT_FAILED)
    return failed


class HttpError(Exception):
    """A client library's error carrying the response status (as httpx, openai do)."""

    def __init__(self, message: str, status_code: object = None, **attrs: object) -> None:
        super().__init__(message)
        self.status_code = status_code
        for name, value in attrs.items():
            setattr(self, name, value)


def _named(name: str, base: type[BaseException] = Exception) -> type[BaseException]:
    return type(name, (base,), {})


class _Response:
    def __init__(self, status_code: object = None, headers: dict[str, str] | None = None) -> None:
        self.status_code = status_code
        self.headers = headers or {}


# -- statuses ------------------------------------------------------------------------------------
STATUSES = {
    429: "rate_limit",
    408: "timeout",
    504: "timeout",
    500: "server_error",
    503: "server_error",
    599: "server_error",
    413: "context_overflow",
    400: "validation",
    404: "validation",
    499: "validation",
}


@pytest.mark.parametrize("status", STATUSES)
def test_a_failure_with_a_status_is_typed_from_it(status: int) -> None:
    failed = _failed_event(HttpError("request failed", status))
    assert failed.error_type.value == STATUSES[status]
    assert failed.error_detail is not None and failed.error_detail.status == status


@pytest.mark.parametrize(
    "exc",
    [
        HttpError("x", status=429),
        HttpError("x", http_status=429),
        HttpError("x", response=_Response(429)),
    ],
    ids=["status", "http_status", "response.status_code"],
)
def test_a_status_is_read_from_any_of_its_usual_places(exc: HttpError) -> None:
    del exc.status_code
    failed = _failed_event(exc)
    assert (failed.error_type.value, failed.error_detail.status) == ("rate_limit", 429)  # type: ignore[union-attr]


def test_a_status_that_is_not_a_number_is_absent() -> None:
    failed = _failed_event(HttpError("request failed", "429", response=_Response("429")))
    assert failed.error_type.value == "unknown"
    assert failed.error_detail is not None and failed.error_detail.status is None


def test_the_first_status_attribute_wins() -> None:
    failed = _failed_event(HttpError("x", 429, status=500, response=_Response(503)))
    assert failed.error_type.value == "rate_limit"
    failed = _failed_event(HttpError("x", None, status=500, response=_Response(429)))
    assert failed.error_type.value == "server_error"


# -- class names and text ------------------------------------------------------------------------
NAMES = {
    "RateLimitError": "rate_limit",
    "APITimeoutError": "timeout",
    "APIConnectionError": "network",
    "InternalServerError": "server_error",
    "ServiceUnavailableError": "server_error",
    "OutputParserException": "schema_mismatch",
    "ValidationError": "schema_mismatch",
    "ContextWindowExceededError": "context_overflow",
    "ToolException": "tool_error",
}


@pytest.mark.parametrize("name", NAMES)
def test_a_client_librarys_error_is_typed_by_its_class_name_or_a_base_classs(name: str) -> None:
    assert _failed_event(_named(name)("x")).error_type.value == NAMES[name]
    subclass = type("MyError", (_named(name),), {})
    assert _failed_event(subclass("x")).error_type.value == NAMES[name]


def test_a_validation_error_with_a_status_is_typed_from_the_status() -> None:
    """An HTTP 429 raised as a (pydantic-named) ``ValidationError`` is still a rate limit."""
    error = _named("ValidationError")("x")
    error.status_code = 429  # type: ignore[attr-defined]
    assert _failed_event(error).error_type.value == "rate_limit"
    error.status_code = 0  # type: ignore[attr-defined]
    assert _failed_event(error).error_type.value == "schema_mismatch"


@pytest.mark.parametrize(
    "text",
    [
        "This model's maximum context length is 8192 tokens",
        "context window exceeded",
        "Too many tokens in the request",
        "prompt is too long: 210000 tokens",
        "CONTEXT LENGTH exceeded",
    ],
)
def test_an_overflow_is_typed_from_the_text_before_the_status(text: str) -> None:
    assert _failed_event(HttpError(text, 400)).error_type.value == "context_overflow"
    assert _failed_event(RuntimeError(text)).error_type.value == "context_overflow"


PYTHON_ERRORS = {
    "TimeoutError": (TimeoutError("slow"), "timeout"),
    "a name with Timeout": (_named("ReadTimeout")("slow"), "timeout"),
    "ConnectionError": (ConnectionResetError("reset"), "network"),
    "OSError": (OSError("no route"), "network"),
    "a ConnectError base": (type("X", (_named("ConnectError"),), {})("x"), "network"),
    "a NetworkError base": (type("X", (_named("NetworkError"),), {})("x"), "network"),
    "JSONDecodeError": (json.JSONDecodeError("Expecting value", "", 0), "schema_mismatch"),
    "KeyError": (KeyError("total"), "logic"),
    "TypeError": (TypeError("x"), "logic"),
    "AttributeError": (AttributeError("x"), "logic"),
    "AssertionError": (AssertionError("x"), "logic"),
    "ZeroDivisionError": (ZeroDivisionError("x"), "logic"),
    "ValueError": (ValueError("x"), "validation"),
    "anything else": (RuntimeError("x"), "unknown"),
}


@pytest.mark.parametrize("case", PYTHON_ERRORS, ids=list(PYTHON_ERRORS))
def test_a_python_error_is_typed_by_its_class(case: str) -> None:
    exc, error_type = PYTHON_ERRORS[case]
    assert _failed_event(exc).error_type.value == error_type


def test_a_cancelled_task_is_typed_cancelled_and_not_retryable() -> None:
    failure = classify(asyncio.CancelledError())
    assert (failure.error_type.value, failure.retryable) == ("cancelled", False)


# -- what the failure carries --------------------------------------------------------------------
def test_the_message_names_the_class_and_the_code_is_the_class() -> None:
    failed = _failed_event(HttpError("upstream said no", 503))
    assert failed.error_detail is not None
    assert failed.error_detail.message == "HttpError: upstream said no"
    assert failed.error_detail.code == "HttpError"
    assert failed.error_detail.stack_digest is not None


@pytest.mark.parametrize(("header", "retryable"), [("true", True), ("false", False)])
def test_the_servers_should_retry_header_decides_retryable(header: str, retryable: bool) -> None:
    exc = HttpError("x", 400, response=_Response(400, {"x-should-retry": header}))
    assert classify(exc).retryable is retryable
    assert _failed_event(exc).retryable is retryable


def test_without_a_status_the_header_is_not_read() -> None:
    exc = HttpError("x", None, response=_Response(None, {"x-should-retry": "false"}))
    assert classify(exc).retryable is True  # the class's default: unknown is retried


def test_retry_after_is_read_from_the_failure() -> None:
    exc = HttpError("x", 429, retry_after=2.5)
    assert classify(exc).retry_after_ms == 2500


def test_a_failure_raised_by_the_agent_is_kept_as_it_is() -> None:
    failure = Failure("rate_limit", "slow down", status=429)
    try:
        raise failure
    except Failure as raised:
        assert classify(raised) is failure
    assert failure.stack_digest is not None
    digest = failure.stack_digest
    assert classify(failure).stack_digest == digest


# -- redaction and the limit ---------------------------------------------------------------------
def test_a_long_message_is_cut_to_the_limit_with_an_ellipsis() -> None:
    text = "x" * (MAX_ERROR_MESSAGE_CHARS * 3)
    failed = _failed_event(RuntimeError(text))
    assert failed.error_detail is not None
    message = failed.error_detail.message
    assert len(message) == MAX_ERROR_MESSAGE_CHARS and message.endswith("x…")
    assert message.startswith("RuntimeError: xxx")


@pytest.mark.parametrize("length", [0, 1, 100])
def test_a_message_within_the_limit_is_kept_whole(length: int) -> None:
    text = "y" * (MAX_ERROR_MESSAGE_CHARS - len("RuntimeError: ") - length)
    failed = _failed_event(RuntimeError(text))
    assert (
        failed.error_detail is not None and failed.error_detail.message == f"RuntimeError: {text}"
    )


@pytest.mark.parametrize("shift", [-40, -20, -5, 0, 5])
def test_a_secret_at_the_limits_edge_is_redacted_not_half_kept(shift: int) -> None:
    key = "sk-proj-" + "Zx81QmT4vB7nR2pL9sK3wY6d" * 2
    head = "RuntimeError: "
    pad = "p " * ((MAX_ERROR_MESSAGE_CHARS + shift - len(head)) // 2)
    failed = _failed_event(RuntimeError(pad + key + " tail" * 200))
    assert failed.error_detail is not None
    message = failed.error_detail.message
    assert "Zx81QmT4" not in message and "R2pL9sK3" not in message, message[-80:]
    assert len(message) <= MAX_ERROR_MESSAGE_CHARS


def test_redact_without_a_limit_keeps_a_long_text_whole() -> None:
    text = "z" * 10_000 + " key sk-proj-Zx81QmT4vB7nR2pL9sK3wY6d"
    assert redact(text) == "z" * 10_000 + " key [REDACTED_KEY]"
    assert redact(text, limit=20) == "z" * 19 + "…"


@pytest.mark.parametrize("size", [2_048, 2_049, 5_000])
def test_long_and_short_texts_are_redacted_alike(size: int) -> None:
    tail = " mail mei.chen@example.com"
    text = "w" * (size - len(tail)) + tail
    assert redact(text) == "w" * (size - len(tail)) + " mail [EMAIL]"
    assert redact(text) == redact(text)  # memoised or not, the same answer
