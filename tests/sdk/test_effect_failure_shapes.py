"""A side effect is never done twice, whatever shape its failure takes (issue 35 item 1).

The failure-shape matrix: real clients (httpx, requests, aiohttp, openai, anthropic) and
real asyncio deadlines and cancellations, against a local server that counts the
requests it *processed* — the ground truth. Each request fails either *before* it can
reach the server (the connection is refused: the effect cannot have happened) or *after*
the server processed it (it resets the connection, hangs up without an answer, or stalls
past the client's timeout or the caller's deadline).

A contract-less (keyless) side effect, and one declared ``unsafe=True``, is retried after
a failure before and never repeated after one: the task is handed off with a reason that
says the effect may have happened. Zero duplicated effects in every cell.
"""

from __future__ import annotations

import asyncio
import socket
import warnings
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply, anthropic_message, openai_completion

from retrylens.errors import HandedOff
from retrylens.schemas import EventKind
from retrylens.sdk import CallbackChannel, Governor
from retrylens.testing import CapturedEvents, capture_events

START = datetime(2026, 12, 1, tzinfo=UTC)
STALL_TIMEOUT_S = 1.0  # the client's timeout and the deadlines where the server stalls
STALL_S = 3.0  # a stalled server answers long after
#: The client's timeout in force. Only a stall needs a short one; every other shape fails
#: at once, and a short timeout there could turn a refused or reset request into a timeout
#: on a loaded machine (a different shape than the test means), so they get a long one.
CLIENT_TIMEOUT: ContextVar[float] = ContextVar("client_timeout", default=60.0)

AFTER = {
    "reset": Reply(reset=True),
    "hang_up": Reply(drop=True),
    "stall": Reply(delay_s=STALL_S),
}


def _dead_url() -> str:
    """A loopback port nobody listens on: connecting is refused before anything is sent."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# -- the clients, as a user's tool calls them -------------------------------------------
BODY = {"amount": 10, "currency": "EUR"}
CHAT = [{"role": "user", "content": "charge it"}]


def httpx_sync(base: str) -> Any:
    import httpx

    response = httpx.post(f"{base}/v1/charges", json=BODY, timeout=CLIENT_TIMEOUT.get())
    response.raise_for_status()
    return response.json()


def requests_sync(base: str) -> Any:
    import requests

    response = requests.post(f"{base}/v1/charges", json=BODY, timeout=CLIENT_TIMEOUT.get())
    response.raise_for_status()
    return response.json()


def openai_sync(base: str) -> Any:
    import openai

    client = openai.OpenAI(
        base_url=f"{base}/v1", api_key="k", max_retries=0, timeout=CLIENT_TIMEOUT.get()
    )
    return client.chat.completions.create(model="gpt-4o", messages=CHAT).id  # type: ignore[arg-type]


def anthropic_sync(base: str) -> Any:
    import anthropic

    client = anthropic.Anthropic(
        base_url=base, api_key="k", max_retries=0, timeout=CLIENT_TIMEOUT.get()
    )
    return client.messages.create(model="claude-x", max_tokens=8, messages=CHAT).id  # type: ignore[arg-type]


async def httpx_async(base: str, *, no_timeout: bool = False) -> Any:
    import httpx

    async with httpx.AsyncClient(timeout=None if no_timeout else CLIENT_TIMEOUT.get()) as client:
        response = await client.post(f"{base}/v1/charges", json=BODY)
        response.raise_for_status()
        return response.json()


async def aiohttp_async(base: str) -> Any:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT.get())
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(f"{base}/v1/charges", json=BODY) as response,
    ):
        response.raise_for_status()
        return await response.json()


async def openai_async(base: str) -> Any:
    import openai

    client = openai.AsyncOpenAI(
        base_url=f"{base}/v1", api_key="k", max_retries=0, timeout=CLIENT_TIMEOUT.get()
    )
    return (await client.chat.completions.create(model="gpt-4o", messages=CHAT)).id  # type: ignore[arg-type]


async def anthropic_async(base: str) -> Any:
    import anthropic

    client = anthropic.AsyncAnthropic(
        base_url=base, api_key="k", max_retries=0, timeout=CLIENT_TIMEOUT.get()
    )
    return (await client.messages.create(model="claude-x", max_tokens=8, messages=CHAT)).id  # type: ignore[arg-type]


async def wait_for_deadline(base: str) -> Any:
    """No client timeout: the caller's ``asyncio.wait_for`` cuts the call."""
    return await asyncio.wait_for(httpx_async(base, no_timeout=True), CLIENT_TIMEOUT.get())


async def timeout_block_deadline(base: str) -> Any:
    """No client timeout: the caller's ``async with asyncio.timeout`` cuts the call."""
    async with asyncio.timeout(CLIENT_TIMEOUT.get()):
        return await httpx_async(base, no_timeout=True)


SYNC = {"httpx": httpx_sync, "requests": requests_sync, "openai": openai_sync,
        "anthropic": anthropic_sync}  # fmt: skip
ASYNC = {
    "httpx": httpx_async,
    "aiohttp": aiohttp_async,
    "openai": openai_async,
    "anthropic": anthropic_async,
    "asyncio.wait_for": wait_for_deadline,
    "asyncio.timeout": timeout_block_deadline,
}


def _success_body(client: str) -> bytes:
    if client.startswith("openai"):
        return openai_completion()
    if client.startswith("anthropic"):
        return anthropic_message()
    return b'{"charge": "ch_1"}'


class Rig:
    """A governor on virtual time whose events are captured and whose hand-offs are kept."""

    def __init__(self, captured: CapturedEvents) -> None:
        self.captured = captured
        self.handed: list[Any] = []
        self.g = Governor.with_virtual_time(
            start=START, emit=captured.emit, handoff=CallbackChannel(self.handed.append, raw=True)
        )

    def statuses(self) -> list[str]:
        """The side-effect statuses recorded, in order."""
        return [
            s.status.value
            for e in self.captured.events
            if e.kind is EventKind.SIDE_EFFECT
            for s in e.side_effects
        ]


@pytest.fixture(autouse=True)
def _client_timeout_reset() -> Iterator[None]:
    """A test that shortens the client's timeout never leaves it short for the next."""
    token = CLIENT_TIMEOUT.set(CLIENT_TIMEOUT.get())
    yield
    CLIENT_TIMEOUT.reset(token)


@pytest.fixture
def rig() -> Iterator[Rig]:
    with capture_events() as captured:
        yield Rig(captured)


def _targets(server: FakeProvider, before: bool) -> Iterator[str]:
    """Where each try of the tool sends: a refused port first when the failure is before."""
    if before:
        yield _dead_url()
    while True:
        yield server.url


def _tool(g: Governor, send: Callable[[str], Any], targets: Iterator[str], unsafe: bool) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the no-contract warning: that is the point here
        return g.side_effect("payments.charge", unsafe=unsafe)(lambda: send(next(targets)))


def _async_tool(
    g: Governor, send: Callable[[str], Any], targets: Iterator[str], unsafe: bool
) -> Any:
    async def charge() -> Any:
        return await send(next(targets))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return g.side_effect("payments.charge", unsafe=unsafe)(charge)


# -- failure before the request: retried, done once ---------------------------------------
@pytest.mark.parametrize("unsafe", [False, True], ids=["no_contract", "unsafe"])
@pytest.mark.parametrize("client", SYNC)
def test_a_sync_side_effect_refused_before_sending_is_retried_and_done_once(
    client: str, unsafe: bool, rig: Rig
) -> None:
    g = rig.g
    with FakeProvider(default=Reply(body=_success_body(client))) as server:
        charge = _tool(g, SYNC[client], _targets(server, before=True), unsafe)
        g.call(charge, goal="charge the order")
    assert server.count == 1
    assert rig.statuses() == ["failed", "committed"]
    assert rig.handed == []


@pytest.mark.parametrize("unsafe", [False, True], ids=["no_contract", "unsafe"])
@pytest.mark.parametrize("client", ASYNC)
def test_an_async_side_effect_refused_before_sending_is_retried_and_done_once(
    client: str, unsafe: bool, rig: Rig
) -> None:
    g = rig.g
    with FakeProvider(default=Reply(body=_success_body(client))) as server:
        charge = _async_tool(g, ASYNC[client], _targets(server, before=True), unsafe)
        asyncio.run(g.acall(charge, goal="charge the order"))
    assert server.count == 1
    assert rig.statuses() == ["failed", "committed"]
    assert rig.handed == []


# -- failure after the server processed it: never repeated, handed off -------------------
def _assert_handed_off_once(server: FakeProvider, stopped: Any, handed: list[Any]) -> None:
    assert server.count == 1, f"the server processed {server.count} charges"
    reason = stopped.value.verdict.reason
    assert reason.startswith(
        "ambiguous outcome of side effect payments.charge: it may have happened"
    )
    assert [p.reason for p in handed] == [reason]


#: ``unsafe=True`` never repeats either: proved on each client with the quickest shape (the
#: decision does not depend on the shape once the failure is read as "after")
SYNC_AFTER = [
    (client, shape, unsafe)
    for client in SYNC
    for shape in AFTER
    for unsafe in (False, True)
    if not unsafe or shape == "reset"
]


@pytest.mark.parametrize(
    ("client", "shape", "unsafe"),
    SYNC_AFTER,
    ids=[f"{c}-{s}-{'unsafe' if u else 'no_contract'}" for c, s, u in SYNC_AFTER],
)
def test_a_sync_side_effect_failing_after_the_server_processed_it_is_never_repeated(
    client: str, shape: str, unsafe: bool, rig: Rig
) -> None:
    g = rig.g
    if shape == "stall":
        CLIENT_TIMEOUT.set(STALL_TIMEOUT_S)
    with FakeProvider(default=AFTER[shape]) as server:
        charge = _tool(g, SYNC[client], _targets(server, before=False), unsafe)
        with pytest.raises(HandedOff) as stopped:
            g.call(charge, goal="charge the order")
        _assert_handed_off_once(server, stopped, rig.handed)


#: A caller's deadline cuts only a call still waiting for its answer: the stall.
ASYNC_AFTER = [
    (client, shape, unsafe)
    for client in ASYNC
    for shape in AFTER
    for unsafe in (False, True)
    if (shape == "stall" or not client.startswith("asyncio"))
    and (not unsafe or shape == ("stall" if client.startswith("asyncio") else "reset"))
]


@pytest.mark.parametrize(
    ("client", "shape", "unsafe"),
    ASYNC_AFTER,
    ids=[f"{c}-{s}-{'unsafe' if u else 'no_contract'}" for c, s, u in ASYNC_AFTER],
)
def test_an_async_side_effect_failing_after_the_server_processed_it_is_never_repeated(
    client: str, shape: str, unsafe: bool, rig: Rig
) -> None:
    g = rig.g
    if shape == "stall":
        CLIENT_TIMEOUT.set(STALL_TIMEOUT_S)
    with FakeProvider(default=AFTER[shape]) as server:
        charge = _async_tool(g, ASYNC[client], _targets(server, before=False), unsafe)
        with pytest.raises(HandedOff) as stopped:
            asyncio.run(g.acall(charge, goal="charge the order"))
        _assert_handed_off_once(server, stopped, rig.handed)


def test_a_deadline_around_the_side_effect_inside_the_task_hands_off_instead_of_retrying(
    rig: Rig,
) -> None:
    """The issue's shape: ``wait_for`` in the agent's code around the tool, not in it."""
    g = rig.g
    with FakeProvider(default=AFTER["stall"]) as server:
        charge = _async_tool(
            g, lambda base: httpx_async(base, no_timeout=True), _targets(server, False), False
        )

        async def agent() -> Any:
            return await asyncio.wait_for(charge(), STALL_TIMEOUT_S)

        with pytest.raises(HandedOff) as stopped:
            asyncio.run(g.acall(agent, goal="charge the order"))
        _assert_handed_off_once(server, stopped, rig.handed)
    assert rig.statuses() == ["failed"]


# -- a cancellation from outside: it goes on, and nothing is repeated --------------------
async def _cancel_when(task: asyncio.Task[Any], ready: Callable[[], bool]) -> None:
    for _ in range(1_000):  # up to 10 s on a loaded machine
        if ready():
            break
        await asyncio.sleep(0.01)
    task.cancel()


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_task_cancelled_from_outside_propagates_the_cancellation_and_repeats_nothing(
    where: str, rig: Rig
) -> None:
    """``task.cancel()`` is the caller's decision: the governed call ends cancelled at once
    (no retry, no hand-off), the effect is recorded failed, and it was done at most once."""
    g = rig.g
    started = asyncio.Event()

    async def send(base: str) -> Any:
        started.set()
        if where == "before":
            await asyncio.sleep(5)  # cut before anything is sent
        return await httpx_async(base, no_timeout=True)

    async def main(server: FakeProvider) -> None:
        charge = _async_tool(g, send, _targets(server, False), False)
        task = asyncio.ensure_future(g.acall(charge, goal="charge the order"))
        await _cancel_when(
            task, (lambda: server.count == 1) if where == "after" else started.is_set
        )
        with pytest.raises(asyncio.CancelledError):
            await task

    with FakeProvider(default=AFTER["stall"]) as server:
        asyncio.run(main(server))
        assert server.count == (1 if where == "after" else 0)
    assert rig.statuses() == ["failed"]
    finished = rig.captured.of_kind(EventKind.TASK_FINISHED)
    assert [e.outcome.value for e in finished] == ["cancelled"]
    assert rig.handed == []
