"""Only a ``ValidationError`` that carries an HTTP status is typed by the status, not its name.

A pydantic ``ValidationError`` is a schema mismatch, but a client library's
``ValidationError`` with a status is the server refusing the request: the status decides.
Every other class named in the table keeps its name's type whatever status it carries (a
``RateLimitError`` with a 500 is still a rate limit), and the rule keys on the name's
value, so a class whose name is built at run time is treated the same.
"""

from __future__ import annotations

from retrylens.schemas.taxonomy import ErrorType
from retrylens.sdk.text.sanitizer import classify


def _error(name: str, status: int | None) -> BaseException:
    kind = type(name, (Exception,), {})
    error = kind(f"{name} happened")
    if status is not None:
        error.status_code = status  # type: ignore[attr-defined]
    return error


def test_a_named_class_keeps_its_type_whatever_its_status() -> None:
    assert classify(_error("RateLimitError", 500)).error_type is ErrorType.RATE_LIMIT
    assert classify(_error("APITimeoutError", 500)).error_type is ErrorType.TIMEOUT


def test_a_validation_error_with_a_status_is_typed_by_the_status() -> None:
    assert classify(_error("ValidationError", None)).error_type is ErrorType.SCHEMA_MISMATCH
    assert classify(_error("ValidationError", 503)).error_type is ErrorType.SERVER_ERROR


def test_a_validation_error_named_at_run_time_is_typed_by_its_status_too() -> None:
    name = "".join(["Validation", "Error"])  # equal to the table's name, not the same object
    assert classify(_error(name, 503)).error_type is ErrorType.SERVER_ERROR
