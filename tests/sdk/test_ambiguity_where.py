"""Where a failure happened, read off the exception and what it wraps (issue 35 item 1).

The matrix in ``test_effect_failure_shapes.py`` drives real clients against a server; this
file pins the reading itself on the real libraries' exception classes, including shapes
the server cannot easily make (a connect timeout, a typed ``Failure``, a chain where a
fallback's error wraps an earlier one).
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
import requests

from retrylens.schemas import ErrorType
from retrylens.sdk.ambiguity import may_have_reached
from retrylens.sdk.sanitizer import Failure

REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/charges")


def _raised(outer: BaseException, inner: BaseException) -> BaseException:
    """``outer`` raised ``from inner``, as a client wraps its transport's error."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except BaseException as caught:  # noqa: BLE001 - the chain is what is read
        return caught


@pytest.mark.parametrize(
    "error",
    [
        httpx.ConnectError("refused", request=REQUEST),
        httpx.ConnectTimeout("no connection in time", request=REQUEST),
        httpx.PoolTimeout("no free connection", request=REQUEST),
        requests.ConnectTimeout("connect timeout"),
        ConnectionRefusedError(111, "Connection refused"),
        _raised(RuntimeError("charge failed"), httpx.ConnectError("refused", request=REQUEST)),
    ],
    ids=[
        "httpx-connect",
        "httpx-connect-timeout",
        "httpx-pool",
        "requests-connect-timeout",
        "refused",
        "wrapped-connect",
    ],  # fmt: skip
)
def test_a_failure_before_the_request_left_is_not_ambiguous(error: BaseException) -> None:
    assert may_have_reached(error) is False


@pytest.mark.parametrize(
    "error",
    [
        httpx.ReadTimeout("read", request=REQUEST),
        httpx.RemoteProtocolError("server disconnected", request=REQUEST),
        httpx.ReadError("reset", request=REQUEST),
        requests.ReadTimeout("read timeout"),
        ConnectionResetError(104, "Connection reset by peer"),
        BrokenPipeError(32, "Broken pipe"),
        asyncio.CancelledError(),
        TimeoutError("deadline"),
        Failure(ErrorType.TIMEOUT, "the user typed it a timeout"),
        _raised(ValueError("bad answer"), ConnectionResetError(104, "reset")),
        # a fallback after a refused connection that then reset: the outer failure decides
        _raised(ConnectionResetError(104, "reset"), httpx.ConnectError("x", request=REQUEST)),
    ],
    ids=[
        "httpx-read-timeout",
        "httpx-remote-protocol",
        "httpx-read-error",
        "requests-read-timeout",
        "reset",
        "broken-pipe",
        "cancelled",
        "bare-timeout",
        "typed-timeout",
        "wrapped-reset",
        "reset-after-refused",
    ],  # fmt: skip
)
def test_a_failure_after_the_request_may_have_reached_is_ambiguous(error: BaseException) -> None:
    assert may_have_reached(error) is True


@pytest.mark.parametrize(
    "error",
    [
        ValueError("amount must be positive"),
        httpx.HTTPStatusError(
            "402", request=REQUEST, response=httpx.Response(402, request=REQUEST)
        ),
        KeyError("card"),
    ],
    ids=["own-validation", "status-answered", "own-bug"],
)
def test_an_answer_or_the_tools_own_error_is_not_ambiguous(error: BaseException) -> None:
    assert may_have_reached(error) is False
