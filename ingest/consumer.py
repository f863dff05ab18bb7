"""Kafka → ClickHouse: poll, process, batch, insert, then commit.

The order of a flush is what makes the pipeline lose nothing and count nothing twice:

1. dead letters are sent and flushed to the DLQ topic;
2. the batch's rows go to ClickHouse in one insert whose deduplication token is derived
   from the batch's (topic, partition, first offset, last offset) spans;
3. only then are the offsets committed.

A crash before 3 replays the batch: the same spans give the same token, so the insert is
a no-op, and any row that still slips through shares its ``event_id`` and collapses in the
ReplacingMergeTree (exact reads use ``FINAL``).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.structs import OffsetAndMetadata

from retrylens.config import Settings
from retrylens.errors import InvalidBurstError
from retrylens.store import EventStore

from . import metrics
from .batch import Batch
from .breaker import InvalidBurstBreaker
from .dlq import DeadLetterPublisher
from .encode_pool import EncodePool
from .encoder import EncodedChunk, encode_messages
from .kafka_clients import ensure_topics, make_consumer, make_producer
from .writer import BatchWriter

log = logging.getLogger(__name__)


@dataclass
class ConsumeStats:
    messages: int = 0
    rows: int = 0
    dead_letters: int = 0
    batches: int = 0


class _FlushOnRevoke(ConsumerRebalanceListener):
    """Commit what we hold before partitions move to another consumer."""

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._flush()

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        log.info("assigned partitions: %s", sorted((tp.topic, tp.partition) for tp in assigned))


class IngestConsumer:
    """One member of the ingest consumer group. Scale out by adding members (≤ partitions)."""

    def __init__(
        self,
        settings: Settings,
        store: EventStore,
        *,
        before_commit: Callable[[Batch], None] | None = None,
    ) -> None:
        """``before_commit`` runs between the insert and the commit: a seam for crash tests."""
        self._settings = settings
        self._before_commit = before_commit
        self._writer = BatchWriter(store)
        self._breaker = InvalidBurstBreaker(
            settings.dlq_max_consecutive, settings.dlq_max_ratio, settings.dlq_window
        )
        self._stop = threading.Event()
        self._consumer: KafkaConsumer | None = None
        self._dlq: DeadLetterPublisher | None = None
        self._pool: EncodePool | None = None
        self._batch = self._new_batch()
        self._valid_messages = metrics.MESSAGES.labels("valid")
        self._invalid_messages = metrics.MESSAGES.labels("invalid")
        self.stats = ConsumeStats()

    def _new_batch(self) -> Batch:
        return Batch(self._settings.batch_max_rows, self._settings.batch_max_seconds)

    def stop(self) -> None:
        """Ask the loop to finish its batch, commit and return (safe from any thread)."""
        self._stop.set()

    def install_signal_handlers(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stop())

    def run(
        self, *, idle_exit_s: float | None = None, max_messages: int | None = None
    ) -> ConsumeStats:
        """Consume until :meth:`stop`, ``idle_exit_s`` without messages, or ``max_messages``.

        Raises :class:`InvalidBurstError` (without committing the current batch) when the
        invalid-message breaker trips.
        """
        settings = self._settings
        ensure_topics(settings)
        self._consumer = make_consumer(settings, group_id=settings.kafka_group)
        self._consumer.subscribe([settings.kafka_topic], listener=_FlushOnRevoke(self._flush))
        self._dlq = DeadLetterPublisher(make_producer(settings), settings.kafka_dlq_topic)
        if settings.ingest_workers:
            self._pool = EncodePool(settings.ingest_workers, max_inflight=8 * settings.ingest_workers + 16)
        last_message_at = time.monotonic()
        clean = False
        try:
            while not self._stop.is_set():
                if max_messages is not None and self.stats.messages >= max_messages:
                    break
                records = self._consumer.poll(timeout_ms=self._poll_timeout_ms())
                for messages in records.values():
                    if self._pool is None:
                        # Inline: the workers' own function, run here (one path for both modes).
                        self._add_encoded(messages, encode_messages(messages))
                        continue
                    self._pool.submit(messages)
                    if self._pool.must_drain():
                        self._collect(wait=True)
                self._collect(wait=False)
                if records or not self._consumer.assignment():
                    # Waiting for partitions (e.g. a dead member's session to expire) is not idleness.
                    last_message_at = time.monotonic()
                elif idle_exit_s is not None and time.monotonic() - last_message_at >= idle_exit_s:
                    break
                if self._batch.is_due():
                    self._flush_batch()
            self._flush()
            clean = True
        finally:
            self._close(clean)
        return self.stats

    def _poll_timeout_ms(self) -> int:
        if self._pool is not None and self._pool.pending():
            return 20  # results are waiting to be collected
        if self._batch.is_empty():
            return 500
        return max(1, int(min(0.5, self._batch.seconds_left()) * 1000))

    def _collect(self, *, wait: bool) -> None:
        """Move finished worker results (all of them with ``wait``) into the batch, in order."""
        if self._pool is not None:
            for messages, chunk in self._pool.results(wait=wait):
                self._add_encoded(messages, chunk)

    def _add_encoded(self, messages: list[ConsumerRecord], chunk: EncodedChunk) -> None:
        topic, partition = messages[0].topic, messages[0].partition
        batch = self._batch
        self.stats.messages += len(messages)
        self._valid_messages.inc(chunk.rows)
        self._invalid_messages.inc(len(chunk.invalid))
        if chunk.invalid:
            verdicts = dict(chunk.invalid)
            for index, message in enumerate(messages):
                invalid = verdicts.get(index)
                trip = self._breaker.record(invalid is None)
                if trip is not None:
                    metrics.BREAKER_TRIPS.inc()
                    raise InvalidBurstError(trip, topic=topic, partition=partition, offset=message.offset)
                if invalid is not None:
                    batch.add(invalid, key=message.key, value=message.value, span=False)
        else:
            self._breaker.record_valid(len(messages))
        batch.add_block(chunk.block, chunk.rows)
        batch.cover(topic, partition, messages[0].offset, messages[-1].offset)

    def _flush(self) -> None:
        """Insert and commit everything read so far (waiting for the workers' share)."""
        self._collect(wait=True)
        self._flush_batch()

    def _flush_batch(self) -> None:
        """Insert and commit the current batch; chunks still on the workers join the next one."""
        batch = self._batch
        if batch.is_empty() or self._consumer is None or self._dlq is None:
            return
        for invalid, key, value in batch.invalid:
            self._dlq.publish(invalid, key=key, value=value)
        if batch.invalid:
            self._dlq.flush()
        self.stats.rows += self._writer.write(batch)
        if self._before_commit is not None:
            self._before_commit(batch)
        offsets = {
            TopicPartition(topic, partition): OffsetAndMetadata(last + 1, "", -1)
            for (topic, partition), (_, last) in batch.spans.items()
        }
        self._consumer.commit(offsets)
        self.stats.dead_letters += len(batch.invalid)
        self.stats.batches += 1
        metrics.BATCHES.inc()
        self._report_lag(offsets)
        self._batch = self._new_batch()

    def _report_lag(self, committed: dict[TopicPartition, OffsetAndMetadata]) -> None:
        assert self._consumer is not None
        for tp, meta in committed.items():
            high = self._consumer.highwater(tp)
            if high is not None:
                metrics.LAG.labels(str(tp.partition)).set(max(0, high - meta.offset))

    def _close(self, clean: bool) -> None:
        if self._pool is not None:
            # Before leaving the group: a revoke would otherwise flush work still on the workers.
            self._pool.close()
            self._pool = None
        if not clean:
            # Leaving the group revokes partitions, which would flush: drop the batch
            # instead so that nothing after a failure is committed.
            self._batch = self._new_batch()
        if self._consumer is not None:
            self._consumer.close(autocommit=False)
        if self._dlq is not None:
            self._dlq.close()
        if not clean:
            log.warning("consumer stopped without committing its last batch; it will be replayed")
