"""Clients on httpx or httpx2 that are not stainless-generated: their retries are seen too.

A plain ``httpx.Client().post(...)`` to a model endpoint in a hand-written retry loop, or
a transport retrying its connections (``httpx.HTTPTransport(retries=2)``): inside a
governed attempt each request is an attempt the governor decides (the client's resend of
a failed request is not sent: the governor retries), and under ``observe()`` such calls
form operations with their physical attempts when they go to a known provider host or
run inside ``observing.model_call(...)``. The REAL httpx and httpx2 against a local fake
provider (an HTTP server this test starts).
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import httpx2
import pytest
from fake_provider import OVERLOADED, RATE_LIMITED, FakeProvider, Reply, openai_completion

from retrylens.schemas import Decision, ErrorType, EventKind, TaskOutcome
from retrylens.sdk import GaveUp, Governor, observe
from retrylens.sdk.integrations.providers import observing
from retrylens.sdk.integrations.providers.observing import _backed_off, stop_observing
from retrylens.testing import CapturedEvents, capture_events

START = datetime(2026, 12, 1, tzinfo=UTC)
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

#: a 429 with no Retry-After hint: how long the client waits is its own choice
RATE_LIMITED_NO_HINT = Reply(429, {}, RATE_LIMITED.body)


def virtual_governor(captured: CapturedEvents) -> Governor:
    return Governor.with_virtual_time(start=START, emit=captured.emit, rng=random.Random(1))


def counts(captured: CapturedEvents) -> tuple[int, int]:
    failed = len(captured.of_kind(EventKind.ATTEMPT_FAILED))
    return failed + len(captured.of_kind(EventKind.ATTEMPT_SUCCEEDED)), failed


def ask_with_a_loop(http: Any, url: str, tries: int = 5) -> str:
    """What a hand-written client does: resend on 429 and 5xx, then give up."""
    client = http.Client(timeout=5)
    response = None
    for _ in range(tries):
        response = client.post(f"{url}/v1/chat/completions", json=BODY)
        if response.status_code == 429 or response.status_code >= 500:
            continue
        break
    assert response is not None
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"]["content"])


def ask_waiting(url: str, wait_s: float, tries: int = 5) -> str:
    """A hand-written loop that sleeps ``wait_s`` before each resend."""
    client = httpx.Client(timeout=5)
    for attempt in range(tries):
        if attempt:
            time.sleep(wait_s)
        response = client.post(f"{url}/v1/chat/completions", json=BODY)
        if response.status_code != 429:
            break
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"]["content"])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def connect_tries(caplog: pytest.LogCaptureFixture) -> int:
    """Connections the transport tried, from httpcore's own debug log."""
    return sum(1 for r in caplog.records if r.getMessage().startswith("connect_tcp.started"))


# -- governed -------------------------------------------------------------------------------
@pytest.mark.parametrize("http", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_a_hand_written_retry_loop_gives_one_governed_attempt_per_request(http: Any) -> None:
    wait_20s = Reply(429, {"retry-after-ms": "20000"}, b"{}")
    script = [wait_20s, wait_20s, Reply(body=openai_completion("hi there"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        answer = governor.call(
            lambda: ask_with_a_loop(http, fake.url), goal="say hi", agent="a", dependency="llm"
        )
        assert answer == "hi there"
        assert fake.count == 3
        assert counts(captured) == (3, 2)
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert [(e.error_type, e.error_detail.status) for e in failed] == [
            (ErrorType.RATE_LIMIT, 429)
        ] * 2
        backoffs = [d.backoff_ms for d in captured.of_kind(EventKind.DECISION)]
        assert len(backoffs) == 2 and all(20_000 <= b < 40_000 for b in backoffs)
        assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]


def test_a_provider_that_never_recovers_gets_only_the_requests_the_policy_allows() -> None:
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        with pytest.raises(GaveUp):
            governor.call(
                lambda: ask_with_a_loop(httpx, fake.url), goal="g", agent="a", dependency="llm"
            )
        recorded, failed = counts(captured)
        assert fake.count == recorded == failed
        assert recorded < 5  # the loop alone would have sent 5 per attempt


def test_an_async_loop_is_governed_and_overloaded_is_told_from_other_server_errors() -> None:
    async def ask(url: str) -> str:
        async with httpx.AsyncClient(timeout=5) as client:
            for _ in range(5):
                response = await client.post(f"{url}/v1/messages", json=BODY)
                if response.status_code < 500:
                    break
            response.raise_for_status()
            return str(response.json()["choices"][0]["message"]["content"])

    script = [OVERLOADED, Reply(503), Reply(body=openai_completion("ok"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        answer = asyncio.run(
            governor.acall(lambda: ask(fake.url), goal="g", agent="a", dependency="llm")
        )
        assert answer == "ok"
        assert fake.count == 3
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert [(e.error_type, e.error_detail.status, e.error_detail.code) for e in failed] == [
            (ErrorType.RATE_LIMIT, 529, "overloaded"),
            (ErrorType.SERVER_ERROR, 503, "http_503"),
        ]


def test_a_transport_retrying_its_connections_gives_one_governed_attempt_per_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"

    def ask() -> str:
        client = httpx.Client(transport=httpx.HTTPTransport(retries=2), timeout=5)
        return client.post(f"{url}/v1/chat/completions", json=BODY).text

    caplog.set_level(logging.DEBUG, logger="httpcore")
    with capture_events() as captured:
        governor = virtual_governor(captured)
        with pytest.raises(GaveUp):
            governor.call(ask, goal="g", agent="a", dependency="llm")
        recorded, failed = counts(captured)
        assert connect_tries(caplog) == recorded == failed > 1
        failures = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert {e.error_type for e in failures} == {ErrorType.NETWORK}


# -- observed, no governor --------------------------------------------------------------------
@pytest.fixture
def captured() -> Iterator[CapturedEvents]:
    with capture_events() as events:
        observe(emit=events.emit)
        try:
            yield events
        finally:
            stop_observing()


@contextmanager
def no_time_passing() -> Iterator[None]:
    """The observer's clock stands still: every resend is read as sent at once (a gap of 0).

    A loop that resends at once is ``retry_same`` only while its gap stays under the 20 ms
    rule, which a loaded machine can cross (CI recorded ``retry_backoff`` at a load of ~3);
    with no time passing the reading no longer depends on the machine. The rule's boundary
    itself is pinned exactly by ``test_a_resend_is_a_backoff_from_20_ms_or_the_retry_after_it_honoured``.
    """
    observer = observe()  # the active observer (observe() is idempotent)
    observer.clock = lambda: 0.0
    try:
        yield
    finally:
        observer.clock = time.monotonic


def test_a_resend_is_a_backoff_from_20_ms_or_the_retry_after_it_honoured() -> None:
    """Gaps in milliseconds: 19 ms is the client's own overhead, 20 ms a wait it chose; a
    shorter gap is a backoff only when it honoured the Retry-After (ms) it was asked for."""
    assert [_backed_off(ms, None) for ms in (0, 1, 19, 20, 21, 1000)] == [False] * 3 + [True] * 3
    assert [_backed_off(ms, 5) for ms in (0, 4, 5, 6)] == [False, False, True, True]
    assert _backed_off(0, 0) is False  # "retry after 0 ms" asks for no wait at all


def test_a_loop_to_a_known_provider_host_is_one_operation_with_its_requests(
    captured: CapturedEvents, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RETRYLENS_PROVIDER_HOSTS", "127.0.0.1")
    script = [RATE_LIMITED_NO_HINT, RATE_LIMITED_NO_HINT, Reply(body=openai_completion("hi"))]
    with FakeProvider(script) as fake, no_time_passing():
        assert ask_with_a_loop(httpx, fake.url) == "hi"
        assert fake.count == 3
    assert counts(captured) == (3, 2)
    assert captured.decisions() == [Decision.RETRY_SAME] * 2  # the loop resends at once
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]
    assert {e.dependency for e in captured.events} == {"127.0.0.1"}


def test_requests_to_other_hosts_outside_a_model_call_are_not_counted(
    captured: CapturedEvents,
) -> None:
    script = [RATE_LIMITED, Reply(body=openai_completion("hi"))]
    with FakeProvider(script) as fake:
        assert ask_with_a_loop(httpx, fake.url) == "hi"
        assert fake.count == 2
    assert captured.events == []


def test_a_loop_that_gives_up_is_a_failed_operation_once_the_next_call_begins(
    captured: CapturedEvents, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RETRYLENS_PROVIDER_HOSTS", "127.0.0.1")
    with FakeProvider(default=RATE_LIMITED_NO_HINT) as fake, no_time_passing():
        with pytest.raises(httpx.HTTPStatusError):
            ask_with_a_loop(httpx, fake.url, tries=3)
        fake.script = [Reply(body=openai_completion("next"))]
        client = httpx.Client()
        assert client.post(f"{fake.url}/v1/embeddings", json=BODY).status_code == 200
    assert counts(captured) == (4, 3)
    outcomes = captured.outcomes()
    assert sorted(o.value for o in outcomes.values()) == ["failed", "succeeded"]
    assert captured.decisions() == [Decision.RETRY_SAME] * 2 + [Decision.GIVE_UP]


def test_an_async_loop_that_resends_at_once_is_recorded_as_such_too(
    captured: CapturedEvents, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The async client reports through the same observer: the same reading of the gap."""
    monkeypatch.setenv("RETRYLENS_PROVIDER_HOSTS", "127.0.0.1")

    async def ask(url: str, wait_s: float) -> None:
        async with httpx.AsyncClient(timeout=5) as client:
            for attempt in range(2):
                if attempt:
                    await asyncio.sleep(wait_s)
                response = await client.post(f"{url}/v1/chat/completions", json=BODY)
            response.raise_for_status()

    with FakeProvider([RATE_LIMITED_NO_HINT, Reply(body=openai_completion("hi"))]) as fake, no_time_passing():
        asyncio.run(ask(fake.url, 0.0))
    with FakeProvider([RATE_LIMITED_NO_HINT, Reply(body=openai_completion("hi"))]) as fake:
        asyncio.run(ask(fake.url, 0.08))
    assert captured.decisions() == [Decision.RETRY_SAME, Decision.RETRY_BACKOFF]
    assert captured.of_kind(EventKind.DECISION)[1].backoff_ms >= 80


def test_a_loop_that_sleeps_before_resending_is_recorded_as_backing_off(
    captured: CapturedEvents, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RETRYLENS_PROVIDER_HOSTS", "127.0.0.1")
    script = [RATE_LIMITED_NO_HINT, Reply(body=openai_completion("hi"))]
    with FakeProvider(script) as fake:
        assert ask_waiting(fake.url, 0.08) == "hi"
    assert captured.decisions() == [Decision.RETRY_BACKOFF]
    assert captured.of_kind(EventKind.DECISION)[0].backoff_ms >= 80


def test_a_short_wait_the_provider_asked_for_is_a_backoff_and_ignoring_it_is_not(
    captured: CapturedEvents, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``retry-after-ms: 5`` honoured is a backoff however short; resending sooner is not."""
    monkeypatch.setenv("RETRYLENS_PROVIDER_HOSTS", "127.0.0.1")
    with FakeProvider([RATE_LIMITED, Reply(body=openai_completion("a"))]) as fake:
        assert ask_waiting(fake.url, 0.006) == "a"
    with FakeProvider([RATE_LIMITED, Reply(body=openai_completion("b"))]) as fake, no_time_passing():
        assert ask_with_a_loop(httpx, fake.url) == "b"
    assert captured.decisions() == [Decision.RETRY_BACKOFF, Decision.RETRY_SAME]


def test_an_open_failed_operation_is_closed_when_observing_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RETRYLENS_PROVIDER_HOSTS", "127.0.0.1")
    with capture_events() as captured:
        observe(emit=captured.emit)
        try:
            with FakeProvider(default=RATE_LIMITED) as fake:
                with pytest.raises(httpx.HTTPStatusError):
                    ask_with_a_loop(httpx, fake.url, tries=2)
        finally:
            stop_observing()
        assert counts(captured) == (2, 2)
        assert list(captured.outcomes().values()) == [TaskOutcome.FAILED]


def test_a_marked_model_call_groups_its_requests_whatever_the_host(
    captured: CapturedEvents,
) -> None:
    script = [Reply(503), RATE_LIMITED, Reply(body=openai_completion("hi"))]
    with FakeProvider(script) as fake:
        with observing.model_call("my-llm"):
            answer = ask_with_a_loop(httpx2, fake.url)
        assert answer == "hi"
    assert counts(captured) == (3, 2)
    failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
    assert [(e.error_type, e.error_detail.status) for e in failed] == [
        (ErrorType.SERVER_ERROR, 503),
        (ErrorType.RATE_LIMIT, 429),
    ]
    assert {e.dependency for e in captured.events} == {"my-llm"}
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]


def test_a_marked_model_call_that_fails_records_every_connection_the_transport_tried(
    captured: CapturedEvents, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    caplog.set_level(logging.DEBUG, logger="httpcore")
    client = httpx.Client(transport=httpx.HTTPTransport(retries=2), timeout=5)
    with pytest.raises(httpx.ConnectError), observing.model_call("my-llm"):
        client.post(f"{url}/v1/chat/completions", json=BODY)
    assert connect_tries(caplog) == 3
    assert counts(captured) == (3, 3)
    assert list(captured.outcomes().values()) == [TaskOutcome.FAILED]


def test_an_async_marked_model_call_is_observed_and_returns_the_same(
    captured: CapturedEvents,
) -> None:
    async def ask(url: str) -> int:
        async with httpx.AsyncClient() as client:
            with observing.model_call("my-llm"):
                first = await client.post(f"{url}/v1/chat/completions", json=BODY)
                second = await client.post(f"{url}/v1/chat/completions", json=BODY)
        return first.status_code * 1000 + second.status_code

    with FakeProvider([RATE_LIMITED, Reply(body=openai_completion())]) as fake:
        assert asyncio.run(ask(fake.url)) == 429_200
    assert counts(captured) == (2, 1)
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]


def test_a_stainless_call_the_code_repeats_in_one_attempt_is_refused_with_its_type() -> None:
    import anthropic
    from fake_provider import anthropic_message

    script = [OVERLOADED, OVERLOADED, Reply(body=anthropic_message("hi"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        client = anthropic.Anthropic(base_url=fake.url, api_key="sk-ant-test")

        def ask() -> str:
            hi = [{"role": "user", "content": "hi"}]
            try:
                answer = client.messages.create(model="m", max_tokens=5, messages=hi)
            except anthropic.InternalServerError:  # the code's own second try
                answer = client.messages.create(model="m", max_tokens=5, messages=hi)
            return str(answer.content[0].text)

        assert virtual_governor(captured).call(ask, goal="g", agent="a") == "hi"
        assert fake.count == 3
        assert counts(captured) == (3, 2)
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert {(e.error_detail.status, e.error_detail.code) for e in failed} == {
            (529, "overloaded")
        }


def test_an_async_transport_retrying_its_connections_is_governed_the_same_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"

    async def ask() -> str:
        transport = httpx2.AsyncHTTPTransport(retries=2)
        async with httpx2.AsyncClient(transport=transport, timeout=5) as client:
            return (await client.post(f"{url}/v1/chat/completions", json=BODY)).text

    caplog.set_level(logging.DEBUG, logger="httpcore2")
    with capture_events() as captured:
        governor = virtual_governor(captured)
        with pytest.raises(GaveUp):
            asyncio.run(governor.acall(ask, goal="g", agent="a", dependency="llm"))
        recorded, failed = counts(captured)
        assert connect_tries(caplog) == recorded == failed > 1


def test_leaving_the_retries_to_the_client_lets_the_loop_resend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RETRYLENS_PROVIDER_RETRIES", "client")
    script = [RATE_LIMITED, RATE_LIMITED, Reply(body=openai_completion("hi"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        answer = virtual_governor(captured).call(
            lambda: ask_with_a_loop(httpx, fake.url), goal="g", agent="a"
        )
        assert answer == "hi"
        assert fake.count == 3
        assert counts(captured) == (1, 0)  # the opt-out: one attempt per call, as before


@pytest.mark.parametrize("observed", [False, True], ids=["bare", "observed"])
def test_a_dropped_connection_raises_the_same_with_and_without_observe(
    observed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RETRYLENS_PROVIDER_HOSTS", " 127.0.0.1 ,, ")  # untidy, still read
    with capture_events() as captured:
        if observed:
            observe(emit=captured.emit)
        try:
            with FakeProvider([Reply(drop=True), Reply(429, {"retry-after": "soon"})]) as fake:
                client = httpx.Client()
                with pytest.raises(httpx.RemoteProtocolError):
                    client.post(f"{fake.url}/v1/chat/completions", json=BODY)
                broken = client.post(f"{fake.url}/v1/chat/completions", json=BODY)
                assert (broken.status_code, broken.headers["retry-after"]) == (429, "soon")
        finally:
            stop_observing()
        assert counts(captured) == ((2, 2) if observed else (0, 0))


def test_a_step_the_governor_retries_in_place_sends_its_request_again() -> None:
    """The governor's own retry of a step is a new attempt: its request is not a refused resend."""
    script = [RATE_LIMITED, Reply(body=openai_completion("hi"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        governor = virtual_governor(captured)

        def fetch() -> str:
            response = httpx.Client().post(f"{fake.url}/v1/chat/completions", json=BODY)
            response.raise_for_status()
            return str(response.json()["choices"][0]["message"]["content"])

        answer = governor.call(lambda: governor.step("fetch", fetch), goal="g", agent="a")
        assert answer == "hi"
        assert fake.count == 2
        assert counts(captured) == (2, 1)


def test_a_server_saying_do_not_retry_stops_the_governed_loop_at_one_request() -> None:
    refused = Reply(503, {"x-should-retry": "false"}, b"{}")
    with FakeProvider(default=refused) as fake, capture_events() as captured:
        with pytest.raises(GaveUp):
            virtual_governor(captured).call(
                lambda: ask_with_a_loop(httpx, fake.url), goal="g", agent="a"
            )
        assert fake.count == 1
        (failed,) = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert (failed.error_type, failed.retryable) == (ErrorType.SERVER_ERROR, False)
