"""Backoff as small composable waits (in the spirit of ``tenacity.wait``).

A wait is any callable ``wait(state) -> milliseconds`` (a plain function too);
``state`` needs ``retries`` (retries made so far, ≥ 1 for the first retry),
``retry_after_ms`` (the server's Retry-After, or ``None``) and ``rng`` (a
``random.Random``). Waits combine with ``+`` (add) and ``|`` (take the larger), so the
policy's default reads as a sentence::

    wait_exponential(500, cap_ms=8000) * jitter(0.3) | wait_retry_after()

Each wait holds its parameters; a :class:`~retrylens.sdk.core.policy.BackoffPolicy` compiles
into one with :func:`wait_from_policy`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .policy import BackoffPolicy


class Wait:
    """Base of composable waits."""

    def __call__(self, state: Any) -> float:
        raise NotImplementedError

    def __add__(self, other: Callable[[Any], float]) -> Wait:
        return _Combined(self, other, lambda a, b: a + b, "+")

    def __or__(self, other: Callable[[Any], float]) -> Wait:
        return _Combined(self, other, max, "|")

    def __radd__(self, other: Callable[[Any], float]) -> Wait:
        return _Combined(other, self, lambda a, b: a + b, "+")

    def __ror__(self, other: Callable[[Any], float]) -> Wait:
        return _Combined(other, self, max, "|")

    def __mul__(self, other: jitter) -> Wait:
        return _Jittered(self, other)


class _Combined(Wait):
    def __init__(
        self, left: Callable[[Any], float], right: Callable[[Any], float], op: Any, sym: str
    ) -> None:
        self.left, self.right, self.op, self.sym = left, right, op, sym

    def __call__(self, state: Any) -> float:
        return self.op(self.left(state), self.right(state))

    def __repr__(self) -> str:
        return f"({_describe(self.left)} {self.sym} {_describe(self.right)})"


def _describe(wait: Any) -> str:
    return repr(wait) if isinstance(wait, Wait) else getattr(wait, "__name__", repr(wait))


class wait_none(Wait):  # noqa: N801 - reads as a sentence, like tenacity
    def __call__(self, state: Any) -> float:
        return 0.0

    def __repr__(self) -> str:
        return "wait_none()"


class wait_exponential(Wait):  # noqa: N801
    """``base_ms * 2**(retries-1)``, at most ``cap_ms``."""

    def __init__(self, base_ms: float = 500, *, cap_ms: float = 8_000) -> None:
        self.base_ms, self.cap_ms = base_ms, cap_ms

    def __call__(self, state: Any) -> float:
        exponent = max(0, state.retries - 1)
        return min(self.cap_ms, self.base_ms * (2 ** min(exponent, 30)))

    def __repr__(self) -> str:
        return f"wait_exponential({self.base_ms}, cap_ms={self.cap_ms})"


class wait_retry_after(Wait):  # noqa: N801
    """The server's Retry-After (bounded), or 0 when it gave none."""

    def __init__(self, *, max_ms: float = 60_000) -> None:
        self.max_ms = max_ms

    def __call__(self, state: Any) -> float:
        return min(self.max_ms, float(state.retry_after_ms or 0))

    def __repr__(self) -> str:
        return f"wait_retry_after(max_ms={self.max_ms})"


class jitter:  # noqa: N801
    """Multiply by a uniform factor in ``[1-share, 1+share]``; ``full=True`` → ``[0, 1]``."""

    def __init__(self, share: float = 0.3, *, full: bool = False) -> None:
        self.share, self.full = share, full

    def factor(self, rng: Any) -> float:
        if self.full:
            return rng.random()
        return 1.0 + self.share * (2.0 * rng.random() - 1.0) if self.share else 1.0

    def __repr__(self) -> str:
        return "full_jitter()" if self.full else f"jitter({self.share})"


class _Jittered(Wait):
    def __init__(self, inner: Callable[[Any], float], jit: jitter) -> None:
        self.inner, self.jit = inner, jit

    def __call__(self, state: Any) -> float:
        # jitter first, then the cap: a capped wait never exceeds its cap
        value = self.inner(state) * self.jit.factor(state.rng)
        cap = getattr(self.inner, "cap_ms", None)
        return min(cap, value) if cap is not None else value

    def __repr__(self) -> str:
        return f"{_describe(self.inner)} * {self.jit!r}"


def default_wait() -> Wait:
    """The default policy's backoff: ``wait_exponential(500, cap_ms=8000) * jitter(0.3) | wait_retry_after()``."""
    return wait_exponential(500, cap_ms=8_000) * jitter(0.3) | wait_retry_after(max_ms=60_000)


def wait_from_policy(policy: BackoffPolicy) -> Wait:
    """The policy's backoff compiled into a composed wait (each part holds its parameters)."""
    wait: Wait = wait_exponential(policy.base_ms, cap_ms=policy.cap_ms) * jitter(
        policy.jitter, full=policy.full_jitter
    )
    if policy.honour_retry_after:
        wait = wait | wait_retry_after(max_ms=policy.max_retry_after_ms)
    return wait
