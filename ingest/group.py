"""Several members of the ingest consumer group in one process: threads sharing its store.

The embedded store (chDB) is owned by one process, so the embedded consumer scales out as
threads of that process; against a ClickHouse server, run one ``retrylens consume``
process per member (or several, each with members of its own) instead. Every member is a
full :class:`IngestConsumer` that Kafka assigns partitions to; the group adds what a
process of several members needs:

* :meth:`ConsumerGroup.stop` (SIGTERM/SIGINT) reaches every member: each finishes its
  batch, commits it and leaves the group;
* one member failing (a burst of invalid messages, a store that refuses inserts) halts
  them all. The failing member sets the shared halt *before* it leaves the group, so its
  partitions reach another member only after the halt; from then on no member submits
  what it polled or commits anything, and every member leaves with its open batch
  uncommitted, to be replayed on restart (the same spans give the same insert token);
* one idle exit for the whole group: it is idle once no member read anything for a while
  *and* the live members hold every partition (partitions held by a dead member whose
  session has not expired yet are not idle, they are waiting).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import fields

from retrylens.config import Settings
from retrylens.errors import ConfigError
from retrylens.store import EventStore

from .batch import Batch
from .consumer import ConsumeStats, IngestConsumer
from .status import combine_snapshots

log = logging.getLogger(__name__)

#: How often :meth:`ConsumerGroup.run` looks at its members (stop, idleness, limits).
_TICK_S = 0.1


class ConsumerGroup:
    """``members`` ingest consumers on threads of this process, started and stopped together."""

    def __init__(
        self,
        settings: Settings,
        store: EventStore,
        members: int | None = None,
        *,
        before_commit: Callable[[Batch], None] | None = None,
        halt_together: bool = True,
        threaded_insert: bool = True,
    ) -> None:
        """``members`` defaults to ``settings.ingest_members``. ``before_commit`` is every
        member's seam between insert and commit (crash tests). ``halt_together=False``
        lets members fail alone, as separate processes would (tests of whole-group crashes)."""
        count = settings.ingest_members if members is None else members
        if count < 1:
            raise ConfigError(f"a consumer group needs at least one member, got {count}")
        self._halt = threading.Event() if halt_together else None
        self.members = [
            IngestConsumer(
                settings, store, before_commit=before_commit, threaded_insert=threaded_insert, halt=self._halt
            )
            for _ in range(count)
        ]
        self.errors: list[BaseException | None] = [None] * count
        self._failed_order: list[int] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._last_polled = 0

    def start(self, *, idle_exit_s: float | None = None) -> ConsumerGroup:
        """Start every member on its own thread (``idle_exit_s``: each member's own idle exit)."""
        for index, member in enumerate(self.members):
            thread = threading.Thread(
                target=self._run_member, args=(index, member, idle_exit_s), name=f"retrylens-member-{index}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        return self

    def _run_member(self, index: int, member: IngestConsumer, idle_exit_s: float | None) -> None:
        try:
            member.run(idle_exit_s=idle_exit_s)
        except BaseException as exc:  # noqa: BLE001 - kept for the caller, which re-raises it
            with self._lock:
                self.errors[index] = exc
                self._failed_order.append(index)
            log.error("consumer-group member %d of %d failed: %s", index + 1, len(self.members), exc)

    def stop(self) -> None:
        """Ask every member to finish its batch, commit and leave (safe from any thread)."""
        for member in self.members:
            member.stop()

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT stop every member (call from the main thread)."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stop())

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait for every member thread; True once all of them ended."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not self.alive

    @property
    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    @property
    def first_failure(self) -> tuple[int, BaseException] | None:
        """The member that failed first and its error (the others were halted by it)."""
        with self._lock:
            if not self._failed_order:
                return None
            index = self._failed_order[0]
            error = self.errors[index]
        assert error is not None
        return index, error

    def run(self, *, idle_exit_s: float | None = None, max_messages: int | None = None) -> ConsumeStats:
        """Run every member until :meth:`stop`, the group's idle exit or about ``max_messages``
        in total; re-raises the error of the member that failed first."""
        self.start()
        idle_since: float | None = None
        while self.alive:
            time.sleep(_TICK_S)
            if max_messages is not None and self.stats.messages >= max_messages:
                self.stop()
            if idle_exit_s is not None:
                if self._idle():
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since >= idle_exit_s:
                        self.stop()
                else:
                    idle_since = None
        self.join()
        failure = self.first_failure
        if failure is not None:
            index, error = failure
            if self._halt is not None:
                log.error(
                    "consumer-group member %d of %d failed; every member stopped without committing its "
                    "open batch (it is replayed on restart)", index + 1, len(self.members),
                )
            raise error
        return self.stats

    def _idle(self) -> bool:
        """No member polled a record since the last look, and the live members hold every
        partition (one held by a dead member, whose session is still open, is not idle)."""
        activity = [member.activity() for member in self.members]
        polled = sum(a.polled for a in activity)
        fresh, self._last_polled = polled != self._last_polled, polled
        partitions = max((a.partitions for a in activity), default=0)
        return not fresh and partitions > 0 and sum(a.assigned for a in activity) >= partitions

    @property
    def stats(self) -> ConsumeStats:
        """What every member read, inserted and dead-lettered, summed."""
        total = ConsumeStats()
        for member in self.members:
            for field in fields(ConsumeStats):
                setattr(total, field.name, getattr(total, field.name) + getattr(member.stats, field.name))
        return total

    def member_stats(self) -> list[dict[str, int]]:
        """Each member's own figures, in member order."""
        return [dict(member.stats.__dict__) for member in self.members]

    def status_snapshot(self) -> dict:
        """Does the group keep up: the members' figures combined, and each member's own."""
        return combine_snapshots([member.status.snapshot() for member in self.members])
