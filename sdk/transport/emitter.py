"""The agent-side event emitter: never blocks the agent, never raises into it, loses nothing.

``emit()`` serializes the event (orjson, see :mod:`.serializer`; a few microseconds) and
puts the record on a bounded in-memory queue (or, when that is full, appends it to the
local spool). A background pump hands queued records to a :class:`Sink` (Kafka, or memory
in tests). Serializing in the caller's thread, not the pump's, is cheaper in total: the
pump shares the caller's GIL anyway, and an event read on another core than the one that
built it drags its ~40-field dict across the caches (measured: ~1.5 µs a clean first try,
about a tenth of it; see bench/sdk_overhead.py).
Whatever the sink cannot take — broker down, timeouts — goes to the spool, and the pump
replays the spool to the sink in order once it answers again. While older records wait in the spool, newer ones queue
behind them there, so a task's events keep their order. With no sink (embedded mode)
the spool *is* the destination: the store-owning process ingests it.

A spool that cannot persist (a full disk) rolls its append back and says so
(:class:`~retrylens.errors.SpoolWriteError`); the pump then keeps those records in memory,
first in line, and tries again after a pause, so they land in order once space is back.
Only what is still unwritten when the emitter closes, or what overflows a full queue
meanwhile, is dropped, and counted (``dropped_spool_unwritable``).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections import Counter, deque
from typing import TYPE_CHECKING, Any, Protocol

from retrylens.errors import EventTooLargeError, SpoolWriteError

from .serializer import event_bytes
from .spool import Spool

if TYPE_CHECKING:
    from retrylens.schemas import RetryEvent

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes]  # (key = task_id, value = serialized event)


class Sink(Protocol):
    """Where the pump delivers records, in order."""

    def deliver(self, records: list[Record]) -> int:
        """Deliver in order; return how many from the start were durably accepted."""

    def close(self) -> None: ...


class Emitter:
    """Thread-safe; one per process is enough. Use as a context manager or call close()."""

    def __init__(
        self,
        *,
        sink: Sink | None,
        spool: Spool | None,
        queue_size: int = 10_000,
        batch_size: int = 1_000,
        min_backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
    ) -> None:
        if sink is None and spool is None:
            raise ValueError("an emitter needs a sink, a spool, or both")
        self._sink = sink
        self._spool = spool
        # A deque, not queue.Queue: append/popleft are atomic and lock-free, so emit() costs
        # little more than the serialization; the bound is checked (approximately) by emit().
        self._queue: deque[Record] = deque()
        self._queue_size = queue_size
        self._busy = False  # the pump holds events it has taken but not yet routed
        self._wake = threading.Event()
        # Notified (under its lock) whenever the pump goes idle, so flush() returns as soon
        # as the last event is delivered instead of polling on a timer.
        self._settled = threading.Condition()
        self._batch_size = batch_size
        self._min_backoff = min_backoff_s
        self._max_backoff = max_backoff_s
        self._backoff = min_backoff_s
        self._next_drain = 0.0
        self._spool_refused = False  # the last append failed: wait longer before the next
        self._spool_pending = spool is not None and sink is not None and spool.has_pending()
        self._pending_lock = threading.Lock()
        self._closing = threading.Event()
        self.rejected = 0
        #: What happened to emitted events, by outcome (``queued``, ``spooled``,
        #: ``spooled_queue_full``, ``dropped_queue_full``, ``dropped_no_spool``,
        #: ``spool_unwritable`` (a batch the spool refused, kept to try again),
        #: ``dropped_spool_unwritable``, ``rejected_oversize``, ``rejected_unserializable``). Plain counters: an agent
        #: needs no metrics library; export them to yours if you want them scraped.
        self.stats: Counter[str] = Counter()
        self._stats_lock = threading.Lock()
        self._pump = threading.Thread(target=self._run, name="retrylens-emitter", daemon=True)
        self._pump.start()
        # The pump is a daemon (it must never keep an agent alive), so an emitter nobody
        # closes — the one ``observe()`` builds, a script that forgets ``close()`` — would lose
        # what is still queued when the interpreter exits. A weak reference: the hook keeps
        # no emitter alive; registered now, it runs after later hooks (atexit is LIFO), such
        # as the plain-call observer's, which still emits at exit.
        self._exit_hook = _close_at_exit(weakref.ref(self))
        atexit.register(self._exit_hook)

    # -- agent side ----------------------------------------------------------------------
    def _count(self, outcome: str, n: int = 1) -> None:
        with self._stats_lock:
            self.stats[outcome] += n

    def _reject(self, outcome: str) -> None:
        with self._stats_lock:  # emit() runs in any of the agent's threads
            self.rejected += 1
            self.stats[outcome] += 1

    def emit(self, event: RetryEvent | Any) -> bool:
        """Hand ``event`` over without blocking. Returns False only if the queue was full
        and there is no spool to take the event.

        An event past the size limit (or one nothing can serialize) is counted in
        :attr:`rejected` and logged, never raised: observability must not break the agent.
        """
        try:
            record = (event.task_id.encode(), event_bytes(event))
        except Exception:  # noqa: BLE001 - counted and logged by _serialize
            rejected = self._serialize(event)
            if rejected is None:
                return True  # nothing to queue: the rejection is in stats and the log
            record = rejected
        if len(self._queue) >= self._queue_size:
            return self._overflow(record)
        self._queue.append(record)  # counted as queued by the pump, per batch (a counter locks)
        return True

    def _overflow(self, record: Record) -> bool:
        if self._spool is None:
            self._count("dropped_queue_full")
            return False
        try:
            with self._pending_lock:
                self._spool.append([record], sync=False)
                self._spool_pending = self._sink is not None
        except SpoolWriteError as exc:  # emit() never raises into the agent
            self._count("dropped_spool_unwritable")
            log.error("queue full and the spool cannot persist: event dropped (%s)", exc)
            return False
        self._count("spooled_queue_full")
        return True

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every emitted event reached the sink (or the spool when there is none)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self._idle() and not (self._sink is not None and self._spool_pending):
                if self._spool is not None:
                    self._spool.sync()
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._settled:
                self._wake.set()
                # Idle with a spool still pending: the pump retries on its own backoff timer.
                self._settled.wait(min(remaining, 0.01 if self._idle() else 0.1))

    def close(self, timeout_s: float = 10.0) -> None:
        """Flush what can be flushed within ``timeout_s``; the rest stays durably spooled."""
        atexit.unregister(self._exit_hook)
        self.flush(timeout_s)
        self._closing.set()
        self._wake.set()
        self._pump.join(timeout=timeout_s + 5)
        if self._pump.is_alive():
            log.error("emitter pump did not stop; %d queued events may be lost", len(self._queue))
            return
        if self._sink is not None:
            self._sink.close()
        if self._spool is not None:
            self._spool.close()

    def __enter__(self) -> Emitter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pump side -----------------------------------------------------------------------
    def _serialize(self, event: RetryEvent) -> Record | None:
        try:
            return event.task_id.encode(), event_bytes(event)
        except EventTooLargeError as exc:
            self._reject("rejected_oversize")
            log.warning("dropping event %s: %s", event.event_id, exc)
        except Exception:  # noqa: BLE001 - emit() must never raise into the agent
            self._reject("rejected_unserializable")
            log.exception("dropping an event that cannot be serialized")
        return None

    def _take(self) -> list[Record]:
        self._wake.clear()  # before looking, so a flush() that sets it from now on is not lost
        self._busy = True
        items: list[Record] = []
        pop = self._queue.popleft
        try:
            while len(items) < self._batch_size:
                items.append(pop())
        except IndexError:
            pass
        if not items:
            self._settle()
            self._wake.wait(0.02)
        else:
            self._count("queued", len(items))
        return items

    def _settle(self) -> None:
        """Mark the pump idle and wake flush() callers waiting for it."""
        with self._settled:
            self._busy = False
            self._settled.notify_all()

    def _idle(self) -> bool:
        return not self._queue and not self._busy

    def _run(self) -> None:
        while True:
            items = self._take()
            if items:
                try:
                    self._route(items)
                except Exception:  # noqa: BLE001 - the pump must survive anything
                    log.exception("emitter pump failed to route %d events", len(items))
                finally:
                    self._settle()
            try:
                if not items and self._spool is not None:
                    self._spool.sync()
                if (
                    self._spool_pending
                    and self._sink is not None
                    and not self._closing.is_set()
                    and time.monotonic() >= self._next_drain
                ):
                    self._drain_spool()
            except Exception:  # noqa: BLE001 - the pump must survive anything (a full disk)
                log.exception("emitter pump failed to sync or replay its spool")
            if self._closing.is_set() and self._idle():
                return

    def _route(self, records: list[Record]) -> None:
        if not records:
            return
        if self._sink is None or self._spool_pending or self._closing.is_set():
            self._to_spool(records)
            return
        delivered = self._deliver(records)
        if delivered < len(records):
            self._to_spool(records[delivered:])

    def _to_spool(self, records: list[Record]) -> None:
        if self._spool is None:
            self._count("dropped_no_spool", len(records))
            log.error("sink refused %d events and there is no spool: dropped", len(records))
            return
        try:
            with self._pending_lock:
                self._spool.append(records)
                self._spool_pending = self._sink is not None
        except SpoolWriteError as exc:
            if self._closing.is_set():
                self._count("dropped_spool_unwritable", len(records))
                log.error("closing and the spool cannot persist: %d events dropped (%s)", len(records), exc)
                return
            self._count("spool_unwritable", len(records))
            log.warning("spool cannot persist (%s); keeping %d events to try again", exc, len(records))
            self._queue.extendleft(reversed(records))  # first in line again: order kept
            self._count("queued", -len(records))  # counted again when taken again
            self._closing.wait(self._max_backoff if self._spool_refused else self._min_backoff)
            self._spool_refused = True
            return
        self._spool_refused = False
        self._count("spooled", len(records))

    def _deliver(self, records: list[Record]) -> int:
        assert self._sink is not None
        try:
            delivered = self._sink.deliver(records)
        except Exception as exc:  # noqa: BLE001 - a sink failure means "spool and retry later"
            log.warning("sink unavailable (%s); spooling", exc)
            delivered = 0
        if delivered < len(records):
            self._next_drain = time.monotonic() + self._backoff
            self._backoff = min(self._backoff * 2, self._max_backoff)
        else:
            self._backoff = self._min_backoff
        return delivered

    def _drain_spool(self) -> None:
        assert self._spool is not None
        with self._pending_lock:
            pending = self._spool.read(max_records=self._batch_size * 5)
            if not pending:
                self._spool_pending = False
                return
        delivered = self._deliver([(r.key, r.value) for r in pending])
        if delivered:
            self._spool.commit(pending[delivered - 1].next_position)


#: How long an emitter nobody closed may hold the interpreter's exit to deliver what it
#: still has (a broker that does not answer: what is left stays in the spool).
EXIT_FLUSH_S = 5.0


def _close_at_exit(ref: weakref.ReferenceType[Emitter]) -> Any:
    def close() -> None:
        emitter = ref()
        if emitter is not None and not emitter._closing.is_set():
            emitter.close(EXIT_FLUSH_S)

    return close
