"""Embedded mode's consumer: spool folders → processor → store, like Kafka → store.

The store-owning process runs it. Each spool folder under the root plays the part of a
topic (``spool:<folder>``), its segment of a partition and the byte position of an
offset, so the batch, its deduplication token and the commit-after-insert order are the
same code as the Kafka consumer's. Invalid records go to a local dead-letter file.
"""

from __future__ import annotations

import base64
import logging
import threading
from pathlib import Path

import orjson

from retrylens.config import Settings
from retrylens.sdk.transport.build import KAFKA_FALLBACK_PREFIX
from retrylens.sdk.transport.spool import Spool
from retrylens.store import EventStore

from . import metrics
from .batch import Batch
from .processor import InvalidMessage, SourceRef, ValidEvent, process
from .writer import BatchWriter

log = logging.getLogger(__name__)
DEAD_LETTER_FILE = "dead_letters.jsonl"


class SpoolIngestor:
    def __init__(self, settings: Settings, store: EventStore) -> None:
        self._settings = settings
        self._root = settings.effective_spool_dir
        self._writer = BatchWriter(store)
        self._dead_letters = settings.data_dir / DEAD_LETTER_FILE
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rows = 0
        self.dead_letters = 0

    def _spools(self) -> list[Path]:
        if not self._root.exists():
            return []
        return sorted(
            p for p in self._root.iterdir() if p.is_dir() and not p.name.startswith(KAFKA_FALLBACK_PREFIX)
        )

    def run_once(self) -> int:
        """Ingest one batch from every spool folder; returns rows written."""
        written = 0
        for directory in self._spools():
            spool = Spool(directory, writer=False)
            records = spool.read(max_records=self._settings.batch_max_rows)
            if not records:
                continue
            batch = Batch(self._settings.batch_max_rows, self._settings.batch_max_seconds)
            topic = f"spool:{directory.name}"
            for record in records:
                outcome = process(record.value, SourceRef(topic, record.position.segment, record.position.offset))
                metrics.MESSAGES.labels("valid" if isinstance(outcome, ValidEvent) else "invalid").inc()
                batch.add(outcome, key=record.key, value=record.value)
            self._write_dead_letters(batch.invalid)
            written += self._writer.write(batch)
            spool.commit(records[-1].next_position)
        self.rows += written
        return written

    def drain(self) -> int:
        """Ingest until every spool is empty."""
        total = 0
        while (written := self.run_once()) or self._any_pending():
            total += written
        return total

    def _any_pending(self) -> bool:
        return any(Spool(d, writer=False).has_pending() for d in self._spools())

    def _write_dead_letters(self, invalid: list[tuple[InvalidMessage, bytes | None, bytes | None]]) -> None:
        if not invalid:
            return
        self._dead_letters.parent.mkdir(parents=True, exist_ok=True)
        with open(self._dead_letters, "ab") as handle:
            for message, key, value in invalid:
                handle.write(
                    orjson.dumps(
                        {
                            "reason": message.reason.value,
                            "detail": message.detail,
                            "source": f"{message.source.topic}:{message.source.partition}:{message.source.offset}",
                            "key": (key or b"").decode("utf-8", "replace"),
                            "value_b64": base64.b64encode(value or b"").decode(),
                        }
                    )
                    + b"\n"
                )
                metrics.DEAD_LETTERS.labels(message.reason.value).inc()
        self.dead_letters += len(invalid)

    def start(self, interval_s: float = 0.5) -> None:
        """Ingest in a background thread until :meth:`stop`."""

        def loop() -> None:
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
