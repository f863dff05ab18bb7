"""Ingest workers: chunks go out to processes, results come back in submission order.

The consumer polls Kafka and inserts into ClickHouse on its own core while worker
processes validate and encode what it polled before (``ingest_workers`` setting). Results
are handed back strictly in the order chunks were submitted, so batches, offset spans and
the invalid-burst policy see messages exactly as the inline path does. A worker that
dies raises in the consumer, which then stops without committing: the batch is replayed.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

from .encoder import EncodedChunk, RawChunk, encode_chunk


@dataclass(frozen=True, slots=True)
class Submitted:
    raw: RawChunk
    result: Future[EncodedChunk]


class EncodePool:
    def __init__(self, workers: int, *, max_inflight: int) -> None:
        """``max_inflight`` chunks at most are queued; submitting more waits for the oldest."""
        context = multiprocessing.get_context("spawn")  # never fork a process holding chDB or Kafka sockets
        self._executor = ProcessPoolExecutor(max_workers=workers, mp_context=context)
        self._inflight: deque[Submitted] = deque()
        self._max_inflight = max_inflight
        # Start the workers (a spawn imports RetryLens: about a second) while the consumer
        # is still joining its group, not when the first poll returns.
        for _ in range(workers):
            self._executor.submit(encode_chunk, "warm-up", 0, [], [])

    def submit(self, raw: RawChunk) -> None:
        """Queue one partition's consecutive messages (only offsets and values travel)."""
        future = self._executor.submit(encode_chunk, raw.topic, raw.partition, raw.offsets, raw.values, raw.projects)
        self._inflight.append(Submitted(raw, future))

    def must_drain(self) -> bool:
        return len(self._inflight) >= self._max_inflight

    def results(self, *, wait: bool) -> Iterator[tuple[RawChunk, EncodedChunk]]:
        """Finished chunks from the oldest on; with ``wait``, every queued chunk."""
        while self._inflight and (wait or self._inflight[0].result.done()):
            head = self._inflight.popleft()
            yield head.raw, head.result.result()

    def pending(self) -> int:
        return len(self._inflight)

    def close(self) -> None:
        for submitted in self._inflight:
            submitted.result.cancel()
        self._inflight.clear()
        self._executor.shutdown(wait=True, cancel_futures=True)
