"""The waits between retries follow the policy's backoff exactly, read on emitted decisions.

``base_ms * 2**(n-1)`` capped at ``cap_ms``, jittered by ``± jitter`` (or uniformly in
``[0, wait]`` with ``full_jitter``), never above the cap, and the server's Retry-After
honoured (as the larger of the two, at most ``max_retry_after_ms``) unless switched off.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from retrylens.schemas import EventKind
from retrylens.sdk import Governor, parse_policy
from retrylens.sdk.core.backoff import (
    jitter,
    wait_exponential,
    wait_from_policy,
    wait_none,
    wait_retry_after,
)
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)


class RateLimited(Exception):
    status_code = 429

    def __init__(self, retry_after_s: float | None = None) -> None:
        super().__init__("slow down")
        self.headers = {} if retry_after_s is None else {"Retry-After": str(retry_after_s)}


def _waits(backoff: dict[str, object], errors: list[Exception], seed: int = 7) -> list[int]:
    """The backoff_ms of every decision of one governed call that fails with ``errors``."""
    policy = parse_policy(
        {
            "backoff": backoff,
            "caps": {"rate_limit": 10, "network": 10},
            "budget": {"max_attempts": 12},
        }
    )
    queue = list(errors)

    def work() -> str:
        if queue:
            raise queue.pop(0)
        return "ok"

    with capture_events() as captured:
        gov = Governor.with_virtual_time(
            policy, start=START, emit=captured.emit, rng=random.Random(seed)
        )
        assert gov.call(work, goal="g", agent="a") == "ok"
        return [e.backoff_ms for e in captured.of_kind(EventKind.DECISION)]


def test_waits_double_from_the_base_up_to_the_cap() -> None:
    waits = _waits({"base_ms": 50, "cap_ms": 300, "jitter": 0.0}, [ConnectionError()] * 6)
    assert waits == [50, 100, 200, 300, 300, 300]


def test_jittered_waits_stay_within_the_share_and_under_the_cap() -> None:
    errors = [ConnectionError()] * 8
    exact = [min(1_000, 100 * 2**n) for n in range(8)]
    for seed in range(20):
        waits = _waits({"base_ms": 100, "cap_ms": 1_000, "jitter": 0.5}, errors, seed=seed)
        for wait, plain in zip(waits, exact, strict=True):
            assert 0.5 * plain - 1 <= wait <= min(1_000, 1.5 * plain) + 1
    spread = {
        tuple(_waits({"base_ms": 100, "cap_ms": 1_000, "jitter": 0.5}, errors, seed=s))
        for s in range(5)
    }
    assert len(spread) == 5  # the jitter really varies the waits


def test_full_jitter_waits_anywhere_from_zero_to_the_wait() -> None:
    errors = [ConnectionError()] * 4
    seen: list[float] = []
    for seed in range(30):
        waits = _waits(
            {"base_ms": 400, "cap_ms": 8_000, "jitter": 0.0, "full_jitter": True}, errors, seed=seed
        )
        seen += [w / (400 * 2**n) for n, w in enumerate(waits)]
    assert all(0 <= share <= 1 for share in seen)
    assert min(seen) < 0.2 and max(seen) > 0.8


def test_retry_after_wins_when_longer_and_is_bounded() -> None:
    backoff = {"base_ms": 100, "cap_ms": 1_000, "jitter": 0.0, "max_retry_after_ms": 5_000}
    waits = _waits(backoff, [RateLimited(2), RateLimited(0.05), RateLimited(60), RateLimited()])
    assert waits == [2_000, 200, 5_000, 800]


def test_retry_after_is_ignored_when_the_policy_says_so() -> None:
    backoff = {"base_ms": 100, "cap_ms": 1_000, "jitter": 0.0, "honour_retry_after": False}
    assert _waits(backoff, [RateLimited(2), RateLimited(2)]) == [100, 200]


class _View:
    def __init__(self, retries: int, retry_after_ms: int | None = None, seed: int = 1) -> None:
        self.retries, self.retry_after_ms, self.rng = retries, retry_after_ms, random.Random(seed)


@pytest.mark.parametrize(
    ("wait", "view", "expected"),
    [
        (wait_exponential(10, cap_ms=10_000), _View(1), 10),
        (wait_exponential(10, cap_ms=10_000), _View(4), 80),
        (wait_exponential(10, cap_ms=10_000), _View(0), 10),  # never below the base
        (wait_exponential(10, cap_ms=50), _View(40), 50),  # huge retry counts stay capped
        (wait_none(), _View(3), 0),
        (wait_retry_after(max_ms=100), _View(1, 70), 70),
        (wait_retry_after(max_ms=100), _View(1, 700), 100),
        (wait_retry_after(), _View(1, None), 0),
        (wait_exponential(10) + wait_retry_after(), _View(2, 5), 25),
        (wait_exponential(10) | wait_retry_after(), _View(2, 5), 20),
        (wait_exponential(10) | wait_retry_after(), _View(2, 500), 500),
        (wait_retry_after() + wait_exponential(10), _View(2, 5), 25),
        (wait_retry_after() | wait_exponential(10), _View(2, 5), 20),
        ((lambda _v: 7.0) + wait_exponential(10), _View(1), 17),
        ((lambda _v: 70.0) | wait_exponential(10), _View(1), 70),
        (wait_exponential(10) * jitter(0.0), _View(3), 40),
    ],
)
def test_composed_waits_compute_what_they_say(wait, view, expected) -> None:  # noqa: ANN001
    assert wait(view) == expected


def test_a_jittered_capped_wait_never_exceeds_its_cap() -> None:
    wait = wait_exponential(100, cap_ms=150) * jitter(0.9)
    values = [wait(_View(3, seed=s)) for s in range(200)]
    assert max(values) <= 150 and min(values) < 150 * 0.5


def test_jitter_factors_span_their_range() -> None:
    rng = random.Random(3)
    factors = [jitter(0.3).factor(rng) for _ in range(2_000)]
    assert 0.7 <= min(factors) < 0.72 and 1.28 < max(factors) <= 1.3
    full = [jitter(full=True).factor(rng) for _ in range(2_000)]
    assert 0 <= min(full) < 0.02 and 0.98 < max(full) <= 1
    assert jitter(0.0).factor(rng) == 1.0


def test_a_policy_compiles_into_the_wait_it_describes() -> None:
    policy = parse_policy({"backoff": {"base_ms": 20, "cap_ms": 90, "jitter": 0.0}})
    wait = wait_from_policy(policy.backoff)
    assert [wait(_View(n)) for n in (1, 2, 3, 4)] == [20, 40, 80, 90]
    assert wait(_View(1, 500)) == 500
    assert "wait_retry_after" in repr(wait) and "wait_exponential(20" in repr(wait)
    off = parse_policy({"backoff": {"base_ms": 20, "honour_retry_after": False, "jitter": 0.0}})
    assert wait_from_policy(off.backoff)(_View(1, 500)) == 20


def test_the_default_wait_is_the_default_policys_backoff() -> None:
    """What a rule gets without a wait is what the default policy writes down (500 ms, ±30 %)."""
    from retrylens.sdk import RetryPolicy
    from retrylens.sdk.core.backoff import default_wait

    policy_wait = wait_from_policy(RetryPolicy().backoff)
    for seed in range(50):
        for retries in (1, 2, 5, 9):
            for retry_after in (None, 3_000, 90_000):
                ours = default_wait()(_View(retries, retry_after, seed=seed))
                theirs = policy_wait(_View(retries, retry_after, seed=seed))
                assert ours == theirs
    first = [default_wait()(_View(1, seed=s)) for s in range(400)]
    assert 350 <= min(first) < 360 and 640 < max(first) <= 650


def test_the_exponent_stops_at_thirty_so_huge_retry_counts_never_overflow() -> None:
    unbounded = wait_exponential(1, cap_ms=float("inf"))
    assert unbounded(_View(31)) == 2**30 and unbounded(_View(30)) == 2**29
    assert unbounded(_View(10_000)) == 2**30
