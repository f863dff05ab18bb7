"""The alert outbox: every page to send, kept on disk until its receiver acknowledges it.

Why a file beside the store and not a call in the evaluation loop: a webhook that is down
when a rule fires must still get the page when it comes back, a restart in between must not
lose it, and a slow receiver must not hold up the rules of other projects. So evaluation
only *enqueues* (a SQLite transaction, milliseconds) and :mod:`.alert_delivery` posts.

Two tables, one SQLite file in the data directory (``<data_dir>/alert_outbox.sqlite3``):

* ``incidents`` — the open incident per ``(rule_id, slice_value)`` and its **dedup key**,
  made once when the incident opens and reused by every delivery of it (the firing, its
  retries, a repeated firing after a crash, the resolution), as PagerDuty's ``dedup_key``
  and Alertmanager's group key are. Opening an incident that is already open returns the
  same key, so a re-firing never pages twice.
* ``deliveries`` — one row per (receiver, dedup key, status): ``pending`` until a 2xx,
  then ``delivered``, or ``gave_up`` with the reason. The unique key makes enqueueing
  idempotent. Deliveries of one *lane* (project, receiver) are sent in order, so a
  resolution never overtakes its firing.

The schedule is decided here (sans-I/O): :meth:`Outbox.record_failure` sets the next try by
:func:`backoff_s`; :mod:`.alert_delivery` only performs the posts. Times are epoch seconds of
the outbox's ``clock`` (the wall clock; tests pass a virtual one), which the dispatcher shares.
A page is aged from when it was queued, by that clock, never from the time its evaluation was
run for: an evaluation of a past time (a replay, a catch-up) queued pages that were given up
at their first failed try as a day old. The evaluation's time stays in the page (``at``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

OUTBOX_FILE = "alert_outbox.sqlite3"
#: First retry after 5 s, doubling, never more than 5 minutes apart.
BACKOFF_BASE_S, BACKOFF_CAP_S = 5.0, 300.0
#: A delivery not acknowledged within a day is given up (logged, shown in the alert history).
GIVE_UP_AFTER_S = 24 * 3600.0

State = Literal["pending", "delivered", "gave_up"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS incidents (
    rule_id TEXT NOT NULL, slice_value TEXT NOT NULL, dedup_key TEXT NOT NULL,
    opened_at REAL NOT NULL, closed_at REAL,
    PRIMARY KEY (rule_id, slice_value, dedup_key)
);
CREATE TABLE IF NOT EXISTS deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL, receiver TEXT NOT NULL, trusted INTEGER NOT NULL,
    dedup_key TEXT NOT NULL, status TEXT NOT NULL, rule_id TEXT NOT NULL, slice_value TEXT NOT NULL,
    payload TEXT NOT NULL, created_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL, last_error TEXT NOT NULL DEFAULT '', done_at REAL,
    UNIQUE (receiver, dedup_key, status)
);
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (state, next_at);
"""


def backoff_s(attempts: int) -> float:
    """Seconds to wait after the ``attempts``-th failed try: 5, 10, 20 … capped at 300."""
    return min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** max(0, attempts - 1))


def dedup_key(rule_id: str, slice_value: str, opened_at: float) -> str:
    """A key that names one incident: the rule, the slice (hashed: any text) and when it opened."""
    digest = hashlib.sha256(slice_value.encode()).hexdigest()[:12]
    return f"retrylens-{rule_id}-{digest}-{int(opened_at * 1000)}"


@dataclass(frozen=True)
class Delivery:
    """One page to one receiver; ``trusted``: the operator's own webhook (not address-checked)."""

    id: int
    project: str
    receiver: str
    trusted: bool
    dedup_key: str
    status: str
    rule_id: str
    slice_value: str
    payload: dict[str, Any]
    created_at: float
    state: State
    attempts: int
    next_at: float
    last_error: str

    @property
    def lane(self) -> tuple[str, str]:
        return (self.project, self.receiver)


class Outbox:
    """The durable queue of pages (see the module doc); safe to share between threads."""

    def __init__(self, path: Path | str = ":memory:", *, clock: Callable[[], float] = time.time) -> None:
        #: epoch seconds: when a page is queued, and the dispatcher's clock unless it is given one
        self.clock = clock
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30, isolation_level=None)
        with self._lock:
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # an acknowledged enqueue survives a power cut
            self._db.executescript(_SCHEMA)

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> Outbox:
        return cls(Path(data_dir) / OUTBOX_FILE)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- incidents --------------------------------------------------------------------

    def open_incident(self, rule_id: str, slice_value: str, *, now: float) -> str:
        """The dedup key of the open incident of this rule and slice, opening one if none is open."""
        with self._lock, self._db:
            row = self._db.execute(
                "SELECT dedup_key FROM incidents WHERE rule_id = ? AND slice_value = ? AND closed_at IS NULL",
                (rule_id, slice_value)).fetchone()
            if row:
                return str(row[0])
            key = dedup_key(rule_id, slice_value, now)
            self._db.execute("INSERT OR IGNORE INTO incidents VALUES (?, ?, ?, ?, NULL)",
                             (rule_id, slice_value, key, now))
            return key

    def close_incident(self, rule_id: str, slice_value: str, *, opened_at: float, now: float) -> str:
        """Close the open incident and return its key; when none is open (already closed, or
        opened before this outbox existed), the key of the last one, else one made from ``opened_at``."""
        with self._lock, self._db:
            row = self._db.execute(
                "SELECT dedup_key, closed_at FROM incidents WHERE rule_id = ? AND slice_value = ?"
                " ORDER BY closed_at IS NULL DESC, opened_at DESC LIMIT 1", (rule_id, slice_value)).fetchone()
            if row is None:
                return dedup_key(rule_id, slice_value, opened_at)
            if row[1] is None:
                self._db.execute("UPDATE incidents SET closed_at = ? WHERE dedup_key = ?", (now, row[0]))
            return str(row[0])

    # --- deliveries -------------------------------------------------------------------

    def enqueue(self, *, project: str, receiver: str, trusted: bool, payload: dict[str, Any],
                now: float | None = None) -> bool:
        """Queue ``payload`` (which carries ``dedup_key``, ``status``, ``rule_id``, ``slice_value``) for
        ``receiver``; ``False`` when that page was queued before (a repeat is never sent twice).

        ``now``: the enqueue time on this outbox's clock (default: ``clock()``), from which the
        page is aged and first due; not the time its evaluation was run for."""
        now = self.clock() if now is None else now
        with self._lock, self._db:
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO deliveries (project, receiver, trusted, dedup_key, status, rule_id,"
                " slice_value, payload, created_at, next_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (project, receiver, int(trusted), payload["dedup_key"], payload["status"], payload["rule_id"],
                 payload["slice_value"], json.dumps(payload), now, now))
            return cursor.rowcount == 1

    def due_lanes(self, now: float) -> list[tuple[str, str]]:
        """Lanes whose oldest pending delivery is due (a lane waits for its head: order is kept)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT d.project, d.receiver FROM deliveries d JOIN (SELECT min(id) AS id FROM deliveries"
                " WHERE state = 'pending' GROUP BY project, receiver) h ON d.id = h.id"
                " WHERE d.next_at <= ? ORDER BY d.project, d.receiver", (now,)).fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    def head(self, lane: tuple[str, str], now: float) -> Delivery | None:
        """The lane's oldest pending delivery if it is due, else ``None``."""
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM deliveries WHERE state = 'pending' AND project = ? AND receiver = ?"
                " ORDER BY id LIMIT 1", lane).fetchone()
        if row is None:
            return None
        delivery = _delivery(row)
        return delivery if delivery.next_at <= now else None

    def record_success(self, delivery: Delivery, *, now: float) -> None:
        self._finish(delivery, "delivered", "", now)

    def record_give_up(self, delivery: Delivery, reason: str, *, now: float) -> None:
        self._finish(delivery, "gave_up", reason, now)

    def record_failure(self, delivery: Delivery, error: str, *, now: float, retry_after_s: float | None = None) -> State:
        """A failed try: schedule the next one (``Retry-After`` honoured up to the cap), or give up
        once the delivery is :data:`GIVE_UP_AFTER_S` old. Returns the delivery's new state."""
        attempts = delivery.attempts + 1
        if now - delivery.created_at >= GIVE_UP_AFTER_S:
            self._finish(delivery, "gave_up", f"not acknowledged within {GIVE_UP_AFTER_S / 3600:g} h; last: {error}",
                         now, attempts=attempts)
            return "gave_up"
        wait = backoff_s(attempts) if retry_after_s is None else min(BACKOFF_CAP_S, max(retry_after_s, BACKOFF_BASE_S))
        with self._lock, self._db:
            self._db.execute("UPDATE deliveries SET attempts = ?, next_at = ?, last_error = ? WHERE id = ?",
                             (attempts, now + wait, error, delivery.id))
        return "pending"

    def _finish(self, delivery: Delivery, state: State, error: str, now: float, *, attempts: int | None = None) -> None:
        with self._lock, self._db:
            self._db.execute("UPDATE deliveries SET state = ?, attempts = ?, last_error = ?, done_at = ? WHERE id = ?",
                             (state, delivery.attempts + 1 if attempts is None else attempts, error, now, delivery.id))

    def deliveries(self, *, project: str | None = None, rule_ids: set[str] | None = None,
                   limit: int = 1000) -> list[Delivery]:
        """Deliveries newest first, of one project (and/or of some rules) when asked."""
        sql, params = "SELECT * FROM deliveries WHERE 1", []
        if project is not None:
            sql += " AND project = ?"
            params.append(project)
        if rule_ids is not None:
            sql += f" AND rule_id IN ({','.join('?' * len(rule_ids))})"
            params.extend(sorted(rule_ids))
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY id DESC LIMIT ?", (*params, max(0, int(limit)))).fetchall()
        return [_delivery(row) for row in rows]


def _delivery(row: tuple[Any, ...]) -> Delivery:
    (id_, project, receiver, trusted, key, status, rule_id, slice_value, payload, created_at, state, attempts,
     next_at, last_error, _done_at) = row
    return Delivery(id=int(id_), project=project, receiver=receiver, trusted=bool(trusted), dedup_key=key,
                    status=status, rule_id=rule_id, slice_value=slice_value, payload=json.loads(payload),
                    created_at=float(created_at), state=state, attempts=int(attempts), next_at=float(next_at),
                    last_error=last_error)
