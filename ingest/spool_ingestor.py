"""Embedded mode's consumer: the spool source of the strategy chain (:mod:`.chain`).

The store-owning process runs it. Each spool folder under the root plays the part of a
topic (``spool:<folder>``), its segment of a partition and the byte position of an
offset, so decoding, the batch, its deduplication token and the flush order (dead
letters, one insert, then the commit) are the very steps the Kafka consumer runs. Invalid
records go to a local dead-letter file (:mod:`.dead_letter_file`) instead of the topic.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from retrylens.config import Settings
from retrylens.sdk.transport.build import KAFKA_FALLBACK_PREFIX
from retrylens.sdk.transport.spool import Spool, SpoolPosition, SpoolRecord
from retrylens.store import EventStore

from .batch import Batch
from .chain import build_chain
from .dead_letter_file import DEAD_LETTER_FILE, DeadLetterFile
from .encoder import RawChunk
from .writer import BatchWriter

log = logging.getLogger(__name__)
__all__ = ["DEAD_LETTER_FILE", "SpoolIngestor", "spool_chunks"]


def spool_chunks(topic: str, records: list[SpoolRecord]) -> list[RawChunk]:
    """A spool folder's records as chunks, one per segment (the segment is the partition)."""
    chunks: list[RawChunk] = []
    start = 0
    for end in range(1, len(records) + 1):
        if end == len(records) or records[end].position.segment != records[start].position.segment:
            run = records[start:end]
            chunks.append(
                RawChunk(
                    topic,
                    run[0].position.segment,
                    [r.position.offset for r in run],
                    [r.key for r in run],
                    [r.value for r in run],
                    run[-1].next_position,
                )
            )
            start = end
    return chunks


class SpoolIngestor:
    def __init__(self, settings: Settings, store: EventStore) -> None:
        self._settings = settings
        self._root = settings.effective_spool_dir
        self._sink = DeadLetterFile(settings.data_dir / DEAD_LETTER_FILE)
        self._spools: dict[str, Spool] = {}
        self._chain = build_chain(
            writer=BatchWriter(store),
            dead_letters=self._sink,
            commit=self._commit,
            max_rows=settings.batch_max_rows,
            max_seconds=settings.batch_max_seconds,
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def rows(self) -> int:
        return self._chain.stats.rows

    @property
    def dead_letters(self) -> int:
        return self._chain.stats.dead_letters

    def _folders(self) -> list[Path]:
        if not self._root.exists():
            return []
        return sorted(
            p for p in self._root.iterdir() if p.is_dir() and not p.name.startswith(KAFKA_FALLBACK_PREFIX)
        )

    def run_once(self) -> int:
        """Ingest up to a batch from every spool folder; returns rows written."""
        before = self._chain.stats.rows
        self._spools = {}
        try:
            for directory in self._folders():
                spool = Spool(directory, writer=False)
                records = spool.read(max_records=self._settings.batch_max_rows)
                if not records:
                    continue
                topic = f"spool:{directory.name}"
                self._spools[topic] = spool
                for chunk in spool_chunks(topic, records):
                    self._chain.submit(chunk)
            self._chain.join()
        except BaseException:
            self._chain.accumulate.discard()  # re-read from the cursors next time
            raise
        return self._chain.stats.rows - before

    def _commit(self, batch: Batch) -> None:
        ends: dict[str, SpoolPosition] = {}
        for (topic, _segment), position in batch.positions.items():
            if topic not in ends or position > ends[topic]:
                ends[topic] = position
        for topic, position in ends.items():
            self._spools[topic].commit(position)

    def drain(self) -> int:
        """Ingest until every spool is empty."""
        total = 0
        while (written := self.run_once()) or self._any_pending():
            total += written
        return total

    def _any_pending(self) -> bool:
        return any(Spool(d, writer=False).has_pending() for d in self._folders())

    def start(self, interval_s: float = 0.5) -> None:
        """Ingest in a background thread until :meth:`stop`."""

        def loop() -> None:  # at the caller's priority: it runs Python beside the API (see .priority)
            while not self._stop.is_set():
                try:
                    if not self.run_once():
                        self._stop.wait(interval_s)
                except Exception:  # noqa: BLE001 - keep ingesting; the spool keeps the data
                    log.exception("spool ingest failed; retrying")
                    self._stop.wait(interval_s)

        self._thread = threading.Thread(target=loop, name="retrylens-spool-ingestor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.drain()
