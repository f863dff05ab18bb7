"""Hot reload, hand-off channels, pre-flight, cancel_chain and key stores — against real I/O."""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from retrylens.schemas import SideEffectStatus
from retrylens.sdk import (
    ApiPoller,
    ChainCancelled,
    ClickHouseKeyStore,
    FileChannel,
    FileWatcher,
    Governor,
    HandedOff,
    PolicySource,
    Preflight,
    RetryPolicy,
    SqliteKeyStore,
    WebhookChannel,
)
from retrylens.sdk.core.side_effects import KeyRecord

START = datetime(2024, 5, 1, tzinfo=UTC)


class _Stub(BaseHTTPRequestHandler):
    routes: dict[tuple[str, str], tuple[int, dict]] = {}
    received: list[tuple[str, dict]] = []

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length)) if length else {}
        type(self).received.append((self.path, body))
        status, payload = type(self).routes.get((method, self.path), (404, {}))
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self._answer("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._answer("POST")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[tuple[str, type[_Stub]]]:
    handler = type("Stub", (_Stub,), {"routes": {}, "received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def gov(**kwargs: object) -> Governor:
    kwargs.setdefault("rng", random.Random(5))
    return Governor.with_virtual_time(start=START, **kwargs)  # type: ignore[arg-type]


def always_failing() -> None:
    raise KeyError("missing record")


# -- hot reload ----------------------------------------------------------------------------
def test_policy_file_change_is_picked_up_and_an_invalid_file_keeps_the_running_policy(
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("id: p\nversion: '1'\ncaps: {timeout: 1}\n")
    source = PolicySource()
    watcher = FileWatcher(source, path)
    assert watcher.poll() and source.current.version == "1"
    path.write_text("id: p\nversion: '2'\ncaps: {timeout: 4}\n")
    os.utime(path, (time.time() + 5, time.time() + 5))
    assert watcher.poll() and source.current.version == "2"
    path.write_text("id: p\nversion: '3'\nbackoff: {base_ms: -5}\n")
    os.utime(path, (time.time() + 10, time.time() + 10))
    assert not watcher.poll()
    assert source.current.version == "2" and "backoff.base_ms" in (source.last_error or "")


def test_policy_version_in_force_is_on_every_event_after_a_reload(tmp_path: Path) -> None:
    events: list = []
    source = PolicySource(RetryPolicy(id="p", version="1"))
    g = gov(policy=source, emit=events.append)
    g.call(lambda: "ok", goal="a", agent="x")
    g.call(failing_once(), goal="a", agent="x")
    first = len(events)
    source.set(RetryPolicy(id="p", version="2"))
    g.call(lambda: "ok", goal="b", agent="x")
    g.call(failing_once(), goal="b", agent="x")
    assert {e.policy_version for e in events[:first]} == {"1"} and {
        e.policy_version for e in events[first:]
    } == {"2"}


def failing_once():  # noqa: ANN201
    calls = []

    def fn() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise TimeoutError("slow")
        return "ok"

    return fn


def test_api_poller_reloads_from_the_policy_endpoint_and_survives_errors(stub) -> None:  # noqa: ANN001
    url, handler = stub
    source = PolicySource()
    poller = ApiPoller(source, url, "shop", "checkout")
    handler.routes[("GET", "/v1/policies/shop/checkout")] = (200, {"id": "api", "version": "7"})
    assert poller.poll() and source.current.version == "7"
    handler.routes[("GET", "/v1/policies/shop/checkout")] = (
        200,
        {"id": "api", "caps": {"nonsense": 1}},
    )
    assert (
        not poller.poll() and source.current.version == "7" and "caps" in (source.last_error or "")
    )
    assert (
        not ApiPoller(source, closed_port(), "shop", "checkout").poll()
        and source.current.version == "7"
    )


# -- hand-off channels ---------------------------------------------------------------------
def test_webhook_channel_posts_a_redacted_package(stub) -> None:  # noqa: ANN001
    url, handler = stub
    handler.routes[("POST", "/handoff")] = (200, {})
    g = gov(handoff=WebhookChannel(f"{url}/handoff"))
    with pytest.raises(HandedOff):
        g.call(always_failing, goal="refund order 7 for ana@example.com", agent="support")
    path, body = handler.received[-1]
    assert path == "/handoff" and body["agent"] == "support" and body["errors"]
    assert "ana@example.com" not in json.dumps(body) and body["context"]


def test_file_channel_appends_one_json_line_per_handoff(tmp_path: Path) -> None:
    target = tmp_path / "handoffs" / "queue.jsonl"
    g = gov(handoff=FileChannel(target))
    for goal in ("one", "two"):
        with pytest.raises(HandedOff):
            g.call(always_failing, goal=goal, agent="a")
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [line["inputs"] for line in lines] == ["one", "two"]


def test_a_failing_channel_still_stops_the_task_and_says_so() -> None:
    events: list = []
    g = gov(handoff=WebhookChannel(closed_port()), emit=events.append)
    with pytest.raises(HandedOff):
        g.call(always_failing, goal="x", agent="a")
    assert "channel failed" in [e for e in events if e.kind == "handoff"][0].decision_reason


# -- pre-flight ----------------------------------------------------------------------------
def test_preflight_fails_open_against_a_closed_port() -> None:
    preflight = Preflight(closed_port(), timeout_s=0.2)
    g = gov(preflight=preflight)
    started = time.perf_counter()
    assert g.call(lambda: "ok", goal="anything", agent="a") == "ok"
    assert preflight.failures == 1 and time.perf_counter() - started < 2


def test_preflight_advice_lowers_the_cap_and_requires_review(stub) -> None:  # noqa: ANN001
    url, handler = stub
    handler.routes[("POST", "/v1/precheck")] = (
        200,
        {
            "risk": 0.93,
            "model_version": "m-3",
            "top_features": ["kw:chargeback"],
            "known_bad_fingerprint": False,
            "recommended": {"max_attempts": 2, "degrade_first": True, "human_review": True},
        },
    )
    packages: list = []
    from retrylens.sdk import CallbackChannel

    g = gov(preflight=Preflight(url), handoff=CallbackChannel(packages.append))
    calls: list = []

    def fn(attempt) -> None:  # noqa: ANN001
        calls.append(attempt.relaxed)
        raise TimeoutError("slow")

    with pytest.raises(HandedOff):
        g.call(fn, goal="chargeback dispute for order 9", agent="support")
    assert calls == []  # human review: the task stops for a person before it runs (issue 12)
    assert "pre-flight" in packages[0].reason and "risk 0.93" in packages[0].reason
    request = handler.received[-1][1]
    assert request["project"] == "default" and request["features"]["kw:chargeback"] is True


def test_preflight_ignores_a_malformed_answer(stub) -> None:  # noqa: ANN001
    url, handler = stub
    handler.routes[("POST", "/v1/precheck")] = (200, {"risk": "high"})
    assert gov(preflight=Preflight(url)).call(lambda: "ok", goal="g", agent="a") == "ok"


# -- cancel_chain --------------------------------------------------------------------------
def test_cancel_chain_stops_sub_agents_in_threads() -> None:
    g = Governor(rng=random.Random(2))
    parent = g.start("parent goal", agent="lead")
    child = g.start("child goal", agent="worker", parent=parent)
    started = threading.Event()
    outcome: list[str] = []

    def worker() -> None:
        attempt = child.begin()
        started.set()
        try:
            while True:
                child.check_cancelled()
                time.sleep(0.005)
        except ChainCancelled:
            outcome.append("cancelled")
        del attempt

    thread = threading.Thread(target=worker)
    thread.start()
    started.wait(2)
    assert child.state.task_id in g.cancel_chain(parent.state.task_id)
    thread.join(2)
    assert outcome == ["cancelled"] and child.state.ledger is parent.state.ledger
    with pytest.raises(ChainCancelled):
        parent.begin()


def test_cancel_chain_cancels_asyncio_sub_agents() -> None:
    g = Governor(rng=random.Random(3))

    async def main() -> list[str]:
        parent = g.start("plan a trip", agent="lead")
        results: list[str] = []

        async def slow(attempt) -> str:  # noqa: ANN001
            await asyncio.sleep(10)
            return "never"

        async def sub(name: str) -> None:
            try:
                await g.acall(slow, goal=name, agent="worker", parent=parent)
            except ChainCancelled:
                results.append(name)

        tasks = [asyncio.create_task(sub(n)) for n in ("flights", "hotels")]
        await asyncio.sleep(0.05)
        g.cancel_chain(parent.state.task_id)
        await asyncio.wait_for(asyncio.gather(*tasks), 2)
        return sorted(results)

    assert asyncio.run(main()) == ["flights", "hotels"]


# -- key stores ----------------------------------------------------------------------------
def test_sqlite_key_store_survives_reopening(tmp_path: Path) -> None:
    store = SqliteKeyStore(tmp_path / "k.sqlite")
    store.put(
        KeyRecord("charge:abc", "t1", "payments", SideEffectStatus.COMMITTED, {"receipt": "ch_1"})
    )
    store.close()
    again = SqliteKeyStore(tmp_path / "k.sqlite")
    record = again.get("charge:abc")
    assert (
        record is not None
        and record.status is SideEffectStatus.COMMITTED
        and record.result == {"receipt": "ch_1"}
    )


@pytest.mark.clickhouse
def test_clickhouse_key_store_shares_keys_through_the_store(store) -> None:  # noqa: ANN001
    first, second = ClickHouseKeyStore(store), ClickHouseKeyStore(store)
    first.put(KeyRecord("charge:k1", "t1", "payments", SideEffectStatus.INTENDED))
    first.put(KeyRecord("charge:k1", "t1", "payments", SideEffectStatus.COMMITTED, "ch_9"))
    record = second.get("charge:k1")
    assert (
        record is not None
        and record.status is SideEffectStatus.COMMITTED
        and record.result == "ch_9"
    )
    assert second.get("charge:missing") is None
