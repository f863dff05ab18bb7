"""The ingest strategy chain: small steps with one interface, as arroyo builds consumers.

Every source (a Kafka partition, a spool folder) feeds :class:`RawChunk` s into the same
chain, and every flush happens in the same order, written once here::

    decode (inline or on worker processes)  →  accumulate  →  flush  →  commit
                                                              │
              dead letters first (the burst policy judges them), then one insert
              (on a helper thread, overlapping the next batch's decoding, if asked)

A step takes items with :meth:`Step.submit`, does time-driven work in :meth:`Step.poll`
(a batch that is old enough is flushed) and pushes everything it holds downstream in
:meth:`Step.join` (shutdown, rebalance, the end of a spool pass). Steps never reach back:
the commit step calls the source's ``commit`` only after the insert returned, so a crash
anywhere before it replays the batch, whose spans give the same deduplication token.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar

from . import metrics
from .batch import Batch
from .breaker import BurstPolicy
from .encode_pool import EncodePool
from .encoder import EncodedChunk, RawChunk, encode_raw
from .processor import InvalidMessage
from .writer import BatchWriter

T_contra = TypeVar("T_contra", contravariant=True)


class Step(Protocol[T_contra]):
    def submit(self, item: T_contra) -> None: ...

    def poll(self) -> None: ...

    def join(self) -> None: ...


class DeadLetterSink(Protocol):
    """Where invalid messages go: the DLQ topic, or a dead-letter file in embedded mode."""

    def publish(self, invalid: InvalidMessage, *, key: bytes | None, value: bytes | None) -> None: ...

    def flush(self) -> None:
        """Return once every published letter is durable."""


@dataclass
class ChainStats:
    messages: int = 0
    rows: int = 0
    dead_letters: int = 0
    batches: int = 0


class Commit:
    """Last step: hand the batch's positions back to the source (after the insert)."""

    def __init__(
        self,
        commit: Callable[[Batch], None],
        stats: ChainStats,
        *,
        before_commit: Callable[[Batch], None] | None = None,
    ) -> None:
        self._commit = commit
        self._stats = stats
        self._before_commit = before_commit

    def submit(self, batch: Batch) -> None:
        if self._before_commit is not None:
            self._before_commit(batch)  # a seam for crash tests
        self._commit(batch)
        self._stats.batches += 1
        metrics.BATCHES.inc()

    def poll(self) -> None:
        return None

    def join(self) -> None:
        return None


class Flush:
    """Dead letters (judged by the burst policy, then sent and flushed), then one insert.

    With ``threaded`` the insert runs on a helper thread (ClickHouse parses and stores the
    block in C++ without the GIL) while the chain goes on decoding the next batch; at most
    one insert is in flight, and its batch is handed to the commit step — from the
    chain's own thread, in order — only once the insert has returned.
    """

    def __init__(
        self,
        next_step: Step[Batch],
        writer: BatchWriter,
        dead_letters: DeadLetterSink,
        stats: ChainStats,
        policy: BurstPolicy | None = None,
        *,
        threaded: bool = False,
    ) -> None:
        self._next = next_step
        self._writer = writer
        self._dead_letters = dead_letters
        self._stats = stats
        self._policy = policy
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="retrylens-insert") if threaded else None
        self._inflight: tuple[Batch, Future[int]] | None = None

    def submit(self, batch: Batch) -> None:
        if self._policy is not None:
            self._policy.check(batch)
        for invalid, key, value in batch.invalid:
            self._dead_letters.publish(invalid, key=key, value=value)
        if batch.invalid:
            self._dead_letters.flush()
        if self._executor is None:
            self._done(batch, self._writer.write(batch))
            return
        self._finish()  # one insert at a time, committed in order
        self._inflight = (batch, self._executor.submit(self._writer.write, batch))

    def _done(self, batch: Batch, rows: int) -> None:
        self._stats.rows += rows
        self._stats.dead_letters += len(batch.invalid)
        self._next.submit(batch)

    def _finish(self) -> None:
        if self._inflight is not None:
            batch, result = self._inflight
            self._inflight = None
            self._done(batch, result.result())

    def inserting(self) -> bool:
        return self._inflight is not None

    def poll(self) -> None:
        if self._inflight is not None and self._inflight[1].done():
            self._finish()
        self._next.poll()

    def join(self) -> None:
        self._finish()
        self._next.join()

    def close(self) -> None:
        """Stop without committing an insert still in flight (its batch is replayed)."""
        self._inflight = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)


class Accumulate:
    """Gathers decoded chunks into a batch, handed on when full or old enough."""

    def __init__(self, next_step: Step[Batch], max_rows: int, max_seconds: float, stats: ChainStats) -> None:
        self._next = next_step
        self._max_rows = max_rows
        self._max_seconds = max_seconds
        self._stats = stats
        self._valid = metrics.MESSAGES.labels("valid")
        self._invalid = metrics.MESSAGES.labels("invalid")
        self.batch = self._new_batch()

    def _new_batch(self) -> Batch:
        return Batch(self._max_rows, self._max_seconds)

    def submit(self, item: tuple[RawChunk, EncodedChunk]) -> None:
        raw, encoded = item
        self.batch.add(raw, encoded)
        self._stats.messages += len(raw.offsets)
        self._valid.inc(encoded.rows)
        self._invalid.inc(len(encoded.invalid))
        if self.batch.size >= self._max_rows:
            self._hand_on()

    def _hand_on(self) -> None:
        batch, self.batch = self.batch, self._new_batch()
        self._next.submit(batch)

    def poll(self) -> None:
        if self.batch.is_due():
            self._hand_on()
        self._next.poll()

    def join(self) -> None:
        if not self.batch.is_empty():
            self._hand_on()
        self._next.join()

    def discard(self) -> None:
        """Forget the open batch (after a failure: it is replayed from the source)."""
        self.batch = self._new_batch()


class DecodeInline:
    """Validate and encode each chunk in this process (the workers' own function)."""

    def __init__(self, next_step: Step[tuple[RawChunk, EncodedChunk]]) -> None:
        self._next = next_step

    def submit(self, raw: RawChunk) -> None:
        self._next.submit((raw, encode_raw(raw)))

    def poll(self) -> None:
        self._next.poll()

    def join(self) -> None:
        self._next.join()

    def pending(self) -> int:
        return 0

    def close(self) -> None:
        return None


class DecodeInPool:
    """Validate and encode on worker processes; results go on in submission order."""

    def __init__(self, next_step: Step[tuple[RawChunk, EncodedChunk]], workers: int) -> None:
        self._next = next_step
        self._pool = EncodePool(workers, max_inflight=8 * workers + 16)

    def submit(self, raw: RawChunk) -> None:
        self._pool.submit(raw)
        if self._pool.must_drain():
            self._collect(wait=True)

    def _collect(self, *, wait: bool) -> None:
        for result in self._pool.results(wait=wait):
            self._next.submit(result)

    def poll(self) -> None:
        self._collect(wait=False)
        self._next.poll()

    def join(self) -> None:
        self._collect(wait=True)
        self._next.join()

    def pending(self) -> int:
        return self._pool.pending()

    def close(self) -> None:
        self._pool.close()


@dataclass
class Chain:
    """A built chain: submit raw chunks to ``head``; ``accumulate`` holds the open batch."""

    head: DecodeInline | DecodeInPool
    accumulate: Accumulate
    flush: Flush
    stats: ChainStats

    def submit(self, raw: RawChunk) -> None:
        self.head.submit(raw)

    def poll(self) -> None:
        self.head.poll()

    def join(self) -> None:
        self.head.join()

    def seconds_left(self) -> float | None:
        """Until the open batch is due (None: nothing held)."""
        if self.head.pending() or self.flush.inserting():
            return 0.02  # results are waiting on the workers or the insert
        batch = self.accumulate.batch
        return None if batch.is_empty() else batch.seconds_left()

    def close(self) -> None:
        self.head.close()
        self.flush.close()


def build_chain(
    *,
    writer: BatchWriter,
    dead_letters: DeadLetterSink,
    commit: Callable[[Batch], None],
    max_rows: int,
    max_seconds: float,
    workers: int = 0,
    policy: BurstPolicy | None = None,
    before_commit: Callable[[Batch], None] | None = None,
    threaded_insert: bool = False,
) -> Chain:
    """decode → accumulate → flush (dead letters, insert) → commit, for any source."""
    stats = ChainStats()
    committing = Commit(commit, stats, before_commit=before_commit)
    flushing = Flush(committing, writer, dead_letters, stats, policy, threaded=threaded_insert)
    accumulate = Accumulate(flushing, max_rows, max_seconds, stats)
    head: DecodeInline | DecodeInPool = DecodeInPool(accumulate, workers) if workers else DecodeInline(accumulate)
    return Chain(head, accumulate, flushing, stats)
