"""Token buckets per tenant: a burst at once, then a rate; a bucket may go into debt, and a tenant
in debt waits until it is repaid. The byte budget (:mod:`.ingest_budget`) and the CPU budget
(:mod:`.cost_budget`) both count in them."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class TokenBuckets:
    """Per-tenant token buckets (of bytes, or of CPU seconds); one event loop uses them (no lock)."""

    rate: float
    burst: float
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[Hashable, _Bucket] = field(default_factory=dict)

    def _refilled(self, tenant: Hashable) -> _Bucket:
        now = self.clock()
        bucket = self._buckets.get(tenant)
        if bucket is None:
            bucket = self._buckets[tenant] = _Bucket(self.burst, now)
        else:
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.rate)
            bucket.at = now
        return bucket

    def wait_s(self, tenant: Hashable) -> float:
        """0 if ``tenant`` may send now, else the seconds until its debt is repaid."""
        bucket = self._refilled(tenant)
        return 0.0 if bucket.tokens >= 0 else -bucket.tokens / self.rate

    def take(self, tenant: Hashable, size: float) -> None:
        """Take ``size`` (bytes, or CPU seconds for :mod:`.cost_budget`) from ``tenant``'s bucket (it may go into debt)."""
        self._refilled(tenant).tokens -= size
