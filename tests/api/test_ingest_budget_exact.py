"""The tenant budgets' guarantee figure by figure, on a hand-turned clock, in well under a second:
a tenant in debt is refused (429, the hold, ``Retry-After``) before its body is read, every other
tenant is untouched, the local token is never charged, and the CPU measured is what the call spent.

The middleware runs as it does in the server, in front of a small ASGI app that reads the whole
body (what a route does); ``ManualClock.sleep`` stands in for the hold so that the time a refusal
waits and the ``Retry-After`` it then gives are exact. The chDB-backed tests of the same
guarantee through the real app are tests/api/test_ingest_budget.py and test_cost_budget.py.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from manual_clock import ManualClock

from retrylens.api.auth import KeyRing
from retrylens.api.cost_budget import CostBudget, payers
from retrylens.api.ingest_budget import IngestBudget, TokenBuckets
from retrylens.api.measured import measured

KEYS = KeyRing({"shop": "shop-key", "finance": "finance-key"}, admin_token="local-token")
#: a key for both projects (a KeyRing holds one key per project: two rings stand for it)
BOTH = KeyRing({"shop": "both-key", "finance": "both-key"}, admin_token="local-token")


async def _reading_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A route's stand-in: reads the whole body, answers 200 with its size."""
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"%d" % size})


def _call(middleware: IngestBudget, *, key: str | None = "shop-key", chunks: tuple[bytes, ...] = (b"",),
          method: str = "POST", path: str = "/v1/events", headers: dict[bytes, bytes] | None = None,
          scope_type: str = "http") -> tuple[int, dict[bytes, bytes], bytes]:
    """One request through the middleware: its status, headers and body."""
    sent_headers = dict(headers or {})
    if key is not None and not sent_headers:
        sent_headers[b"x-api-key"] = key.encode()
    scope = {"type": scope_type, "method": method, "path": path, "headers": list(sent_headers.items())}
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    answer: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        answer.append(message)

    asyncio.run(middleware(scope, receive, send))
    start, body = answer[0], b"".join(m.get("body", b"") for m in answer[1:])
    return start["status"], dict(start["headers"]), body


def _bytes_budget(clock: ManualClock, *, rate: int = 1000, burst: int = 4000, keyring: KeyRing = KEYS,
                  hold_s: float = 1.0) -> IngestBudget:
    return IngestBudget(_reading_app, keyring, rate_bytes=rate, burst_bytes=burst, hold_s=hold_s, clock=clock,
                        sleep=clock.sleep)


def _cpu_budget(clock: ManualClock, budget: CostBudget, *, keyring: KeyRing = KEYS) -> IngestBudget:
    return IngestBudget(_reading_app, keyring, rate_bytes=0, burst_bytes=0, cost=budget, clock=clock,
                        sleep=clock.sleep)


# --- the buckets -------------------------------------------------------------------------------


def test_a_bucket_in_debt_by_a_fraction_waits_that_fraction_and_one_left_with_a_fraction_waits_nothing() -> None:
    clock = ManualClock()
    buckets = TokenBuckets(rate=2.0, burst=1.0, clock=clock)
    buckets.take("a", 0.5)
    assert buckets.wait_s("a") == 0.0  # half a token left: not in debt
    buckets.take("a", 0.75)
    assert buckets.wait_s("a") == pytest.approx(0.125)  # a quarter in debt at 2 a second
    clock.advance(0.125)
    assert buckets.wait_s("a") == 0.0
    clock.advance(10.0)  # refilled to the burst, not past it: 1.25 takes it a quarter into debt
    buckets.take("a", 1.25)
    assert buckets.wait_s("a") == pytest.approx(0.125)
    assert buckets.wait_s("b") == 0.0  # a tenant never seen starts with its burst


# --- the CPU budget ------------------------------------------------------------------------------


def test_no_payers_wait_nothing_and_a_cost_with_no_payer_or_no_cpu_charges_no_one() -> None:
    clock = ManualClock()
    budget = CostBudget(rate=0.5, burst=1.0, clock=clock)
    assert budget.wait_s(frozenset()) == 0.0  # the local token's payers: none
    budget.charge(frozenset(), 5.0)  # nothing to divide by, nobody charged
    budget.charge({"shop"}, 0.0)
    budget.charge({"shop"}, -3.0)  # none is ever measured; the bucket's cap would undo it anyway
    budget.charge({"shop"}, 1.25)
    assert budget.wait_s({"shop"}) == pytest.approx(0.5)  # 0.25 s of debt at 0.5 a second
    budget.charge({"finance"}, 0.5)  # half a CPU second is charged, not rounded away
    budget.charge({"finance"}, 0.75)
    assert budget.wait_s({"finance"}) == pytest.approx(0.5)


def test_the_cpu_a_call_spent_is_measured_between_its_start_and_end_whether_it_returned_or_raised() -> None:
    def spin_then(fail: bool) -> int:
        total = sum(i * i for i in range(300_000))
        if fail:
            raise RuntimeError("after the work")
        return total

    for fail in (False, True):
        before = time.thread_time()
        done = measured(spin_then, fail)
        around = time.thread_time() - before
        assert 0 < done.cpu_s <= around  # the call's own CPU, not the thread's whole history
        assert (done.error is not None) is fail and (done.value is None) is fail


# --- the middleware: bytes ------------------------------------------------------------------------


def test_a_keys_body_is_charged_chunk_by_chunk_and_in_debt_it_is_held_then_told_when_to_come_back() -> None:
    clock = ManualClock()
    middleware = _bytes_budget(clock, rate=1000, burst=4000)
    assert _call(middleware, chunks=(b"x" * 1000, b"x" * 2000))[0] == 200  # both chunks taken: 1,000 left
    assert _call(middleware, chunks=(b"x" * 3500,))[0] == 200  # let in, not in debt yet: 2,500 in debt
    status, headers, body = _call(middleware, chunks=(b"x" * 10,))
    assert status == 429 and clock.slept == [1.0]  # held for the hold (the debt is longer)
    assert headers[b"retry-after"] == b"2"  # 1.5 s of debt left after the hold, in whole seconds
    assert body == (b'{"detail":"this key is over its ingest budget of 1000 bytes a second '
                    b'(api_ingest_rate_bytes); retry after 2 s"}')
    assert headers[b"content-length"] == str(len(body)).encode()
    assert _call(middleware, key="finance-key", chunks=(b"x" * 3999,))[0] == 200  # another key: its own bucket
    assert clock.slept == [1.0]


def test_a_debt_shorter_than_the_hold_is_held_for_the_debt_and_told_one_second() -> None:
    clock = ManualClock()
    middleware = _bytes_budget(clock, rate=1024, burst=1024, hold_s=1.0)  # binary fractions: exact sums
    assert _call(middleware, chunks=(b"x" * 1280,))[0] == 200
    status, headers, _ = _call(middleware)
    assert status == 429 and clock.slept == [0.25]
    assert headers[b"retry-after"] == b"1"  # repaid during the hold: never "0"
    assert _call(middleware)[0] == 200


def test_a_budget_of_one_byte_a_second_limits_and_a_budget_of_zero_does_not() -> None:
    clock = ManualClock()
    slow = _bytes_budget(clock, rate=1, burst=10)
    assert [_call(slow, chunks=(b"x" * 20,))[0] for _ in range(2)] == [200, 429]
    unlimited = _bytes_budget(clock, rate=0, burst=10)
    assert {_call(unlimited, chunks=(b"x" * 20,))[0] for _ in range(3)} == {200}


def test_only_posts_to_the_ingest_routes_with_a_project_key_are_limited() -> None:
    clock = ManualClock()
    middleware = _bytes_budget(clock, rate=1000, burst=100)
    assert _call(middleware, chunks=(b"x" * 100_000,))[0] == 200  # shop's bucket now 99.9 s in debt
    assert _call(middleware, path="/v1/traces")[0] == 429  # the same bucket on the OTLP route
    for method in ("GET", "PUT", "PATCH", "DELETE"):
        assert _call(middleware, method=method)[0] == 200, method
    assert _call(middleware, path="/v1/projects/shop/metrics")[0] == 200
    assert _call(middleware, key="local-token")[0] == 200  # the local token: never limited
    assert _call(middleware, key="no-such-key")[0] == 200  # the route answers 401
    assert _call(middleware, key="")[0] == 200
    assert _call(middleware, key=None)[0] == 200
    assert _call(middleware, headers={b"authorization": b"Bearer shop-key"})[0] == 429
    assert _call(middleware, headers={b"authorization": b"bearer  shop-key "})[0] == 429
    for scheme in (b"Basic", b"Digest", b"Token"):  # not a bearer: not the key
        assert _call(middleware, headers={b"authorization": scheme + b" shop-key"})[0] == 200, scheme
    assert clock.slept == [1.0, 1.0, 1.0]


def test_a_request_that_is_not_http_passes_through() -> None:
    seen: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    clock = ManualClock()
    middleware = IngestBudget(app, KEYS, rate_bytes=1, burst_bytes=1, clock=clock, sleep=clock.sleep)
    middleware.buckets.take(frozenset({"shop"}), 100)  # type: ignore[union-attr]  # in debt
    for kind in ("websocket", "lifespan"):
        scope = {"type": kind, "method": "POST", "path": "/v1/events", "headers": [(b"x-api-key", b"shop-key")]}
        asyncio.run(middleware(scope, None, None))  # type: ignore[arg-type]
    assert seen == ["websocket", "lifespan"] and clock.slept == []


# --- the middleware: CPU seconds ---------------------------------------------------------------


def test_a_project_in_cpu_debt_is_refused_and_only_it_and_the_local_token_is_never_charged() -> None:
    clock = ManualClock()
    budget = CostBudget(rate=0.5, burst=1.0, clock=clock)
    middleware = _cpu_budget(clock, budget)
    assert _call(middleware, chunks=(b"x" * 10**6,))[0] == 200  # no byte budget: bytes cost nothing here
    budget.charge({"shop"}, 3.0)  # 2 CPU seconds of debt: 4 s at half a second a second
    status, headers, body = _call(middleware)
    assert status == 429 and clock.slept == [1.0] and headers[b"retry-after"] == b"3"
    assert body == (b'{"detail":"this project is over its ingest budget of 0.5 CPU seconds a second '
                    b'(api_ingest_cpu_share); retry after 3 s"}')
    assert _call(middleware, key="finance-key")[0] == 200
    assert _call(middleware, key="local-token")[0] == 200
    clock.advance(3.0)
    assert _call(middleware)[0] == 200 and clock.slept == [1.0]


def test_a_cpu_debt_of_a_fraction_of_a_second_is_refused_and_held_for_that_fraction() -> None:
    clock = ManualClock()
    budget = CostBudget(rate=1.0, burst=1.0, clock=clock)
    middleware = _cpu_budget(clock, budget)
    budget.charge({"shop"}, 1.25)
    status, headers, _ = _call(middleware)
    assert status == 429 and clock.slept == [pytest.approx(0.25)] and headers[b"retry-after"] == b"1"


def test_a_key_for_several_projects_is_refused_for_the_one_in_debt_it_names_or_when_it_names_none() -> None:
    clock = ManualClock()
    budget = CostBudget(rate=1.0, burst=1.0, clock=clock)
    middleware = _cpu_budget(clock, budget, keyring=BOTH)
    budget.charge({"shop"}, 5.0)
    key = b"both-key"

    def named(project: bytes | None) -> int:
        headers = {b"x-api-key": key, **({b"x-retrylens-project": project} if project is not None else {})}
        return _call(middleware, headers=headers)[0]

    assert named(b"finance") == 200  # its named project is not in debt
    assert named(b"shop") == 429
    assert named(None) == 429  # unnamed: charged to both, so refused while either is in debt
    assert named(b"elsewhere") == 429  # not its to name: as unnamed
    assert named(b"") == 429


def test_who_pays_a_key_for_several_projects_and_the_local_token() -> None:
    both = frozenset({"shop", "finance"})
    assert payers(both, "finance") == {"finance"}
    assert payers(both, None) == both
    assert payers(frozenset({"shop"}), "finance") == {"shop"}
    assert payers(None, None) == frozenset()
