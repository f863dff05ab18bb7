"""Side effects that happen exactly once per task step, however often the step is retried.

The idempotency key is derived from task id + step + arguments. Before a side-effecting
tool runs, its *intent* is recorded under the key; after, its *result*. A key already
committed is never executed again — the first result is returned. A key whose intent is
recorded but whose result is unknown (the process died in the call, or it failed after the
request may have reached the other side) runs again only under the tool's contract: *with
the same key* when the tool takes one (payment APIs dedupe on it), after ``verify`` says it
did not happen, or when it is declared harmless twice; without one it is never run again
(:mod:`.effects`). A failed call with a registered rollback leaves "failure debt" that the
governor pays (runs the rollback) before the next attempt.

Key stores: :class:`MemoryKeyStore` (tests), :class:`SqliteKeyStore` (embedded: one local
file, safe across threads and processes via SQLite's locking) and :class:`ClickHouseKeyStore`
(shared by a fleet through the RetryLens store; see its note on concurrency).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from retrylens.schemas.taxonomy import SideEffectStatus


def idempotency_key(task_id: str, step: str, args: Any = None) -> str:
    """``<step>:<32 hex>`` from task id, step and canonical JSON of the arguments."""
    body = json.dumps({"task": task_id, "step": step, "args": args}, sort_keys=True, default=str)
    return f"{step[:60]}:{hashlib.sha256(body.encode()).hexdigest()[:32]}"


@dataclass(frozen=True)
class KeyRecord:
    key: str
    task_id: str
    tool: str
    status: SideEffectStatus
    result: Any = None


class KeyStore(Protocol):
    def get(self, key: str) -> KeyRecord | None: ...
    def put(self, record: KeyRecord) -> None: ...
    def close(self) -> None: ...


class MemoryKeyStore:
    def __init__(self) -> None:
        self._records: dict[str, KeyRecord] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> KeyRecord | None:
        with self._lock:
            return self._records.get(key)

    def put(self, record: KeyRecord) -> None:
        with self._lock:
            self._records[record.key] = record

    def close(self) -> None:
        pass


class SqliteKeyStore:
    """Embedded key store in one SQLite file (WAL mode; several processes may share it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS idempotency_keys (key TEXT PRIMARY KEY, task_id TEXT, "
                "tool TEXT, status TEXT, result TEXT, updated_at REAL)"
            )

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            import sqlite3  # only agents that choose this store pay for it

            conn = self._local.conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        return conn

    def get(self, key: str) -> KeyRecord | None:
        row = (
            self._conn()
            .execute(
                "SELECT key, task_id, tool, status, result FROM idempotency_keys WHERE key = ?",
                (key,),
            )
            .fetchone()
        )
        if row is None:
            return None
        return KeyRecord(
            row[0], row[1], row[2], SideEffectStatus(row[3]), json.loads(row[4]) if row[4] else None
        )

    def put(self, record: KeyRecord) -> None:
        self._conn().execute(
            "INSERT INTO idempotency_keys (key, task_id, tool, status, result, updated_at) VALUES (?,?,?,?,?,?) "
            "ON CONFLICT(key) DO UPDATE SET status=excluded.status, result=excluded.result, "
            "updated_at=excluded.updated_at",
            (
                record.key,
                record.task_id,
                record.tool,
                record.status.value,
                json.dumps(record.result, default=str),
                time.time(),
            ),
        )

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class ClickHouseKeyStore:
    """Shared key store in the RetryLens ClickHouse database (table ``idempotency_keys``).

    Justification: the fleet already runs ClickHouse, and keys are written once or twice
    per side effect (intent, result) and read on retries — a small, append-mostly load a
    ``ReplacingMergeTree(version)`` read with ``FINAL`` serves well. ClickHouse has no
    compare-and-set, so two processes racing on the *same* key at the same instant may
    both see "no record": the key is therefore also passed to the tool's provider, which
    dedupes (the standard idempotency-key contract). Retries of one task are sequential,
    which is the case this store protects.
    """

    def __init__(self, store: Any) -> None:
        # ``store`` is an open, migrated :class:`retrylens.store.EventStore` (migration 0003
        # creates the table); the SDK never imports the server to build it.
        self.client = store.client
        self.table = store.sql("[[db]].idempotency_keys")

    def get(self, key: str) -> KeyRecord | None:
        rows = self.client.query(
            f"SELECT key, task_id, tool, status, result FROM {self.table} FINAL WHERE key = {{key:String}}",
            parameters={"key": key},
        ).result_rows
        if not rows:
            return None
        k, task_id, tool, status, result = rows[0]
        return KeyRecord(
            k, task_id, tool, SideEffectStatus(status), json.loads(result) if result else None
        )

    def put(self, record: KeyRecord) -> None:
        self.client.insert(
            self.table,
            [
                [
                    record.key,
                    record.task_id,
                    record.tool,
                    record.status.value,
                    json.dumps(record.result, default=str),
                    time.time_ns(),
                ]
            ],
            column_names=["key", "task_id", "tool", "status", "result", "version"],
        )

    def close(self) -> None:
        pass
