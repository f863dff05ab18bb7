"""Kafka → ClickHouse: the Kafka source of the strategy chain (:mod:`.chain`).

The order of a flush is what makes the pipeline lose nothing and count nothing twice:

1. dead letters are sent and flushed to the DLQ topic;
2. the batch's rows go to ClickHouse in one insert whose deduplication token is derived
   from the batch's (topic, partition, first offset, last offset) spans;
3. only then are the offsets committed.

That order lives in the chain, shared with the spool ingestor; this module only turns
polls into chunks and commits offsets. A crash before 3 replays the batch: the same spans
give the same token, so the insert is a no-op, and any row that still slips through
shares its ``event_id`` and collapses in the ReplacingMergeTree (exact reads use
``FINAL``).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka import AsyncConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import CommitFailedError, RebalanceInProgressError
from kafka.future import Future
from kafka.structs import OffsetAndMetadata

from retrylens.config import Settings
from retrylens.store import EventStore

from . import metrics
from .batch import Batch
from .binding import ProjectBinding, parse_project_topics
from .breaker import BurstPolicy, InvalidBurstBreaker
from .chain import Chain, ChainStats, build_chain
from .dlq import DeadLetterPublisher
from .encoder import RawChunk
from .kafka_clients import ensure_topics, make_consumer, make_producer
from .status import IngestStatus
from .writer import BatchWriter

log = logging.getLogger(__name__)

#: A commit the group refuses because it rebalanced under the member: the batch's rows are
#: stored, its offsets are not; whoever owns the partitions next re-reads them.
REFUSED_BY_A_REBALANCE = (CommitFailedError, RebalanceInProgressError)

#: What :meth:`IngestConsumer.run` returns (messages read, rows inserted, dead letters, batches).
ConsumeStats = ChainStats


def raw_chunk(messages: list[ConsumerRecord], binding: ProjectBinding | None = None) -> RawChunk:
    """One partition's consecutive records from a poll (with the projects its topic allows)."""
    first = messages[0]
    return RawChunk(
        first.topic,
        first.partition,
        [m.offset for m in messages],
        [m.key for m in messages],
        [m.value for m in messages],
        messages[-1].offset + 1,
        None if binding is None else binding.projects_for(first.topic),
    )


class _FlushOnRevoke(AsyncConsumerRebalanceListener):
    """Insert and commit what we hold before partitions move to another consumer.

    kafka-python runs rebalance callbacks on its IO thread, where a blocking ``commit``
    is refused; the commits of this flush are sent with ``commit_async`` and awaited, so
    the partitions change hands only after their rows are stored and committed.
    """

    def __init__(self, flush: Callable[[], list[Future]]) -> None:
        self._flush = flush

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        for commit in self._flush():
            try:
                await commit
            except REFUSED_BY_A_REBALANCE as exc:
                # Lost rather than handed over (this member was already out of the group):
                # the rows are stored, the next owner re-reads them, the store keeps one.
                log.warning("commit of the flush refused (%s): the partitions were lost, not handed "
                            "over; their stored rows will be re-read and deduplicated", type(exc).__name__)
                continue
            if commit.failed():
                raise commit.exception

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        await self.on_partitions_revoked(lost)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        log.info("assigned partitions: %s", sorted((tp.topic, tp.partition) for tp in assigned))


@dataclass(frozen=True)
class MemberActivity:
    """What a member's loop last saw: records polled so far, partitions it holds, and the
    partitions of its topics (0 until it first held one). :class:`~.group.ConsumerGroup`
    judges the group idle from these."""

    polled: int
    assigned: int
    partitions: int


class IngestConsumer:
    """One member of the ingest consumer group. Scale out by adding members (≤ partitions):
    as threads of one process with :class:`~.group.ConsumerGroup`, or as processes."""

    def __init__(
        self,
        settings: Settings,
        store: EventStore,
        *,
        before_commit: Callable[[Batch], None] | None = None,
        threaded_insert: bool = True,
        halt: threading.Event | None = None,
        consumer_config: Mapping[str, Any] | None = None,
    ) -> None:
        """``before_commit`` runs between the insert and the commit: a seam for crash tests.
        ``consumer_config``: KafkaConsumer settings over the defaults (tests shorten
        ``max_poll_interval_ms`` with it, so a slow batch loses its partitions in seconds).
        ``threaded_insert``: insert on a helper thread while the next batch is decoded.
        ``halt``: shared by the members of one process. A member that fails sets it before
        it leaves the group; once it is set no member submits what it polled or commits,
        and each one leaves with its open batch uncommitted (replayed on restart)."""
        self._settings = settings
        self._threaded_insert = threaded_insert
        self._before_commit = before_commit
        self._consumer_config = dict(consumer_config or {})
        self._writer = BatchWriter(store)
        self._policy = BurstPolicy(
            InvalidBurstBreaker(settings.dlq_max_consecutive, settings.dlq_max_ratio, settings.dlq_window)
        )
        self._stop = threading.Event()
        self._consumer: KafkaConsumer | None = None
        self._chain: Chain | None = None
        self._halt = halt if halt is not None else threading.Event()
        self._polled = 0
        self._assigned = 0
        self._partitions = 0
        self._lag: dict[int, int] = {}
        self._rebalance_commits: list[Future] | None = None
        #: Commits the group refused because it rebalanced under this member (see :meth:`_commit`).
        self.commit_refusals = 0
        self.stats = ConsumeStats()
        self.status = IngestStatus()

    def stop(self) -> None:
        """Ask the loop to finish its batch, commit and return (safe from any thread)."""
        self._stop.set()

    def activity(self) -> MemberActivity:
        """Safe from any thread (plain counters the loop writes)."""
        return MemberActivity(self._polled, self._assigned, self._partitions)

    def install_signal_handlers(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stop())

    def run(
        self, *, idle_exit_s: float | None = None, max_messages: int | None = None
    ) -> ConsumeStats:
        """Consume until :meth:`stop`, ``idle_exit_s`` without messages, or ``max_messages``.

        Raises :class:`InvalidBurstError` (without committing the current batch) when the
        invalid-message policy of the flush step trips. Returns early, committing nothing
        more, once the shared ``halt`` is set (another member failed).
        """
        settings = self._settings
        ensure_topics(settings)
        self._consumer = make_consumer(settings, group_id=settings.kafka_group, **self._consumer_config)
        dlq = DeadLetterPublisher(make_producer(settings), settings.kafka_dlq_topic)
        self._chain = chain = build_chain(
            writer=self._writer,
            dead_letters=dlq,
            commit=self._commit,
            max_rows=settings.batch_max_rows,
            max_seconds=settings.batch_max_seconds,
            workers=settings.ingest_workers,
            policy=self._policy,
            before_commit=self._before_commit,
            threaded_insert=self._threaded_insert,
        )
        self.stats = chain.stats
        binding = parse_project_topics(
            settings.project_topics, event_topic=settings.kafka_topic, dlq_topic=settings.kafka_dlq_topic
        )
        topics = [settings.kafka_topic] if binding is None else list(binding.topics)
        self._consumer.subscribe(topics, listener=_FlushOnRevoke(self._join))
        last_message_at = time.monotonic()
        clean = False
        try:
            while not self._stop.is_set() and not self._halt.is_set():
                if max_messages is not None and self.stats.messages >= max_messages:
                    break
                records = self._consumer.poll(timeout_ms=self._poll_timeout_ms(chain))
                if self._halt.is_set():
                    # This poll may hold partitions of the member that failed: never submit it.
                    break
                for messages in records.values():
                    self._polled += len(messages)
                    chain.submit(raw_chunk(messages, binding))
                chain.poll()
                assignment = self._consumer.assignment()
                self._note_assignment(assignment, topics)
                if records or not assignment:
                    # Waiting for partitions (e.g. a dead member's session to expire) is not idleness.
                    last_message_at = time.monotonic()
                elif idle_exit_s is not None and time.monotonic() - last_message_at >= idle_exit_s:
                    break
            if not self._halt.is_set():
                chain.join()
                clean = True
        except BaseException:
            self._halt.set()  # before _close leaves the group: the others stop first
            raise
        finally:
            self._close(clean, dlq)
        return self.stats

    def _note_assignment(self, assignment: set[TopicPartition], topics: list[str]) -> None:
        if len(assignment) != self._assigned and assignment:
            assert self._consumer is not None
            self._partitions = sum(len(self._consumer.partitions_for_topic(t) or ()) for t in topics)
        self._assigned = len(assignment)

    @staticmethod
    def _poll_timeout_ms(chain: Chain) -> int:
        left = chain.seconds_left()
        return 500 if left is None else max(1, int(min(0.5, left) * 1000))

    def _join(self) -> list[Future]:
        """Insert everything read so far (a rebalance), unless a member of this process failed;
        returns the commits sent for it, which the listener awaits on the IO thread."""
        if self._chain is None or self._halt.is_set():
            return []
        self._rebalance_commits = []
        try:
            self._chain.join()
            return self._rebalance_commits
        finally:
            self._rebalance_commits = None

    def _commit(self, batch: Batch) -> None:
        assert self._consumer is not None
        if self._halt.is_set():
            log.warning("not committing a batch after a member of this process failed; it will be replayed")
            return
        offsets = {
            TopicPartition(topic, partition): OffsetAndMetadata(position, "", -1)
            for (topic, partition), position in batch.positions.items()
        }
        if self._rebalance_commits is not None:
            self._rebalance_commits.append(self._consumer.commit_async(offsets))
        else:
            try:
                self._consumer.commit(offsets)
            except REFUSED_BY_A_REBALANCE as exc:
                # The group moved on while this batch was inserted (a batch slower than
                # max_poll_interval, or heartbeats starved past the session on a loaded
                # machine): its rows are stored, its offsets are not, so whichever member
                # owns the partitions now re-reads them and the store keeps each event once.
                # Stopping here (what this did before) left the member's work undone; the
                # next poll rejoins the group instead.
                self.commit_refusals += 1
                log.warning("commit refused after a rebalance (%s); the batch's rows are stored and "
                            "will be re-read and deduplicated; rejoining the group", type(exc).__name__)
                return
        for tp, meta in offsets.items():
            high = self._consumer.highwater(tp)
            if high is not None:
                self._lag[tp.partition] = max(0, high - meta.offset)
                metrics.LAG.labels(str(tp.partition)).set(self._lag[tp.partition])
        self.status.record(
            messages=batch.messages, rows=batch.row_count, lag=sum(self._lag.values()),
            insert_s=self._writer.last_insert_s,
        )

    def _close(self, clean: bool, dlq: DeadLetterPublisher) -> None:
        if self._chain is not None:
            # Before leaving the group: a revoke would otherwise flush work still on the workers.
            self._chain.close()
            if not clean:
                # Nothing after a failure is committed: the open batch is replayed.
                self._chain.accumulate.discard()
        if self._consumer is not None:
            self._consumer.close(autocommit=False)
        dlq.close()
        if not clean:
            log.warning("consumer stopped without committing its last batch; it will be replayed")
