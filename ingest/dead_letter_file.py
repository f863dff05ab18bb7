"""The embedded mode's dead-letter sink: one JSON line per invalid record, in a file.

It plays the DLQ topic's part for the spool source: the same reason, detail and source
fields as the topic's headers, and the original bytes (base64) so a letter can be
replayed after a fix. Letters are buffered by ``publish`` and written (fsync'd) by
``flush``, which the flush step calls before the insert, as it does for the topic.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import orjson

from retrylens.sdk.transport.private_dirs import private_dir

from . import metrics
from .processor import InvalidMessage

DEAD_LETTER_FILE = "dead_letters.jsonl"


class DeadLetterFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._pending: list[bytes] = []
        self.written = 0

    def publish(self, invalid: InvalidMessage, *, key: bytes | None, value: bytes | None) -> None:
        self._pending.append(
            orjson.dumps(
                {
                    "reason": invalid.reason.value,
                    "detail": invalid.detail,
                    "source": f"{invalid.source.topic}:{invalid.source.partition}:{invalid.source.offset}",
                    "key": (key or b"").decode("utf-8", "replace"),
                    "value_b64": base64.b64encode(value or b"").decode(),
                }
            )
            + b"\n"
        )
        metrics.DEAD_LETTERS.labels(invalid.reason.value).inc()

    def flush(self) -> None:
        if not self._pending:
            return
        private_dir(self.path.parent)
        with open(self.path, "ab") as handle:
            handle.write(b"".join(self._pending))
            handle.flush()
            os.fsync(handle.fileno())
        self.written += len(self._pending)
        self._pending.clear()
