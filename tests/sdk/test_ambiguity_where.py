"""Where a failure happened, read off the exception and what it wraps (issue 35 item 1).

The matrix in ``test_effect_failure_shapes.py`` drives real clients against a server; this
file pins the reading itself on the real libraries' exception classes, including shapes
the server cannot easily make (a connect timeout, a typed ``Failure``, a chain where a
fallback's error wraps an earlier one).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
import requests

from retrylens.schemas import ErrorType
from retrylens.sdk.core.ambiguity import may_have_reached
from retrylens.sdk.text.sanitizer import Failure

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


def _while_handling(outer: BaseException, inner: BaseException, *, hide: bool = False) -> Any:
    """``outer`` raised inside ``except inner`` (implicit chaining; ``from None`` if ``hide``)."""
    try:
        try:
            raise inner
        except BaseException:
            if hide:
                raise outer from None
            raise outer  # noqa: B904 - the implicit chain is what is read
    except BaseException as caught:  # noqa: BLE001
        return caught


def test_an_error_raised_while_handling_a_reset_is_ambiguous_unless_it_hides_it() -> None:
    reset = ConnectionResetError(104, "reset")
    assert may_have_reached(_while_handling(ValueError("bad answer"), reset)) is True
    assert may_have_reached(_while_handling(ValueError("bad"), reset, hide=True)) is False


def test_aiohttp_timeouts_are_read_by_what_timed_out() -> None:
    import aiohttp

    connect = aiohttp.ServerTimeoutError("Connection timeout to host http://127.0.0.1:9")
    read = aiohttp.ServerTimeoutError("Timeout on reading data from socket")
    assert may_have_reached(connect) is False
    assert may_have_reached(read) is True


def test_requests_keeps_where_in_urllib3s_reason() -> None:
    from urllib3.exceptions import MaxRetryError, NewConnectionError, ProtocolError

    refused = MaxRetryError(None, "/", reason=NewConnectionError(None, "refused"))  # type: ignore[arg-type]
    aborted = MaxRetryError(None, "/", reason=ProtocolError("Connection aborted."))  # type: ignore[arg-type]
    assert may_have_reached(requests.ConnectionError(refused)) is False
    assert may_have_reached(requests.ConnectionError(aborted)) is True


def test_a_chain_is_read_to_sixteen_links_and_a_cycle_ends() -> None:
    deep: BaseException = ConnectionResetError(104, "reset")
    for depth in range(16):
        deep = _raised(ValueError(f"wrapper {depth}"), deep)
    assert may_have_reached(deep) is False  # the reset is the 17th link: past the cap
    assert may_have_reached(deep.__cause__) is True  # type: ignore[arg-type]
    first, second = ValueError("a"), ValueError("b")
    first.__context__, second.__context__ = second, first
    assert may_have_reached(first) is False


def test_a_wrapper_oserror_is_read_by_its_number() -> None:
    """aiohttp's ``ClientOSError`` (older versions raise it bare) keeps the socket's errno."""
    import errno

    import aiohttp

    assert may_have_reached(aiohttp.ClientOSError(errno.ECONNRESET, "reset by peer")) is True
    assert may_have_reached(aiohttp.ClientOSError(errno.EPIPE, "broken pipe")) is True
    assert may_have_reached(aiohttp.ClientOSError(errno.ECONNREFUSED, "refused")) is False
    assert may_have_reached(aiohttp.ClientOSError(errno.ENETUNREACH, "no route")) is False


def test_only_aiohttps_server_timeout_is_read_by_its_message() -> None:
    # aiohttp >= 3.10's socket read timeout, by its name (3.9, the floor, has no such class)
    socket_timeout = type("SocketTimeoutError", (Exception,), {})
    text = "Connection timeout to host http://127.0.0.1:9"  # other classes say where by class
    assert may_have_reached(socket_timeout(text)) is True
    assert may_have_reached(httpx.ReadTimeout(text, request=REQUEST)) is True


def test_the_nearest_wrapped_error_decides_breadth_first() -> None:
    """The error a wrapper names directly decides before one wrapped deeper elsewhere."""
    deeper = _raised(ValueError("inner"), ConnectionResetError(104, "reset"))
    outer = _raised(RuntimeError("charge failed", deeper), httpx.ConnectError("x", request=REQUEST))
    assert may_have_reached(outer) is False


def test_a_failure_that_never_says_where_is_ambiguous_if_it_is_a_connection_or_timeout() -> None:
    assert may_have_reached(ConnectionError("peer went away")) is True
    assert may_have_reached(requests.Timeout("timed out")) is True  # a Timeout by name only
    assert may_have_reached(RuntimeError("no")) is False
