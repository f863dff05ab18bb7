"""Rollup maintenance: backfill from stored events.

The materialized views of migrations 0002 and 0009 fill the rollups and the open set from
every insert after they exist; events stored earlier (or restored from a backup) reach them
through :func:`backfill_rollups`. Every state is a set, so backfilling a range the views
already cover is harmless: nothing is counted twice. Closed buckets are then sealed into
plain counters by :func:`seal_rollups` (periodically: :func:`start_sealer`); open-set rows
backfilled into a sealed bucket are ignored by readers and removed by the next pass.
"""

from __future__ import annotations

from datetime import datetime

from retrylens.store import EventStore
from retrylens.store.schema import OPEN, backfill_statements
from retrylens.store.schema import open_select as open_layout

from .definitions import ATTEMPT_KEY, COSTED, COUNTS, RETRY_OUTCOME, TASK_KEY, WAITED
from .filters import Slice
from .sealing import SealReport, seal_rollups, start_sealer

__all__ = ["SealReport", "backfill_rollups", "seal_rollups", "start_sealer"]


def open_select(source: str) -> str:
    """The open-set rows of the events in ``source``, as the live definitions count them (the view
    of the newest migration computes the same; a test holds the two equal)."""
    counts = tuple((c.name, c.unit, c.condition) for c in COUNTS)
    keys = {"attempt": ATTEMPT_KEY, "task": TASK_KEY}
    return open_layout(source, counts, keys, (RETRY_OUTCOME, WAITED, COSTED))


def backfill_rollups(
    store: EventStore, *, start: datetime | None = None, end: datetime | None = None
) -> int:
    """Re-derive every rollup from events in ``[start, end)``; returns statements run."""
    clause, params = Slice(start=start, end=end).where()
    statements = backfill_statements(store.ctx, clause, kinds=("fingerprints", "groups"))
    source = f"(SELECT * FROM {store.ctx.table('events')} WHERE {clause})"
    statements.append(f"INSERT INTO {store.ctx.table(OPEN)}\n{open_select(source)}")
    for statement in statements:
        store.client.command(statement, parameters=params)
    return len(statements)
