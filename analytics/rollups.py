"""Rollup maintenance: backfill from stored events.

The materialized views of migrations 0002 and 0008 fill the rollups and the open set from
every insert after they exist; events stored earlier (or restored from a backup) reach them
through :func:`backfill_rollups`. Every state is a set, so backfilling a range the views
already cover is harmless: nothing is counted twice. Closed buckets are then sealed into
plain counters by :func:`seal_rollups` (periodically: :func:`start_sealer`); open-set rows
backfilled into a sealed bucket are ignored by readers and removed by the next pass.
"""

from __future__ import annotations

from datetime import datetime

from retrylens.store import EventStore
from retrylens.store.migrations.m0002_rollups import backfill_statements
from retrylens.store.migrations.m0008_rollup_levels import open_backfill_statements

from .filters import Slice
from .sealing import SealReport, seal_rollups, start_sealer

__all__ = ["SealReport", "backfill_rollups", "seal_rollups", "start_sealer"]


def backfill_rollups(
    store: EventStore, *, start: datetime | None = None, end: datetime | None = None
) -> int:
    """Re-derive every rollup from events in ``[start, end)``; returns statements run."""
    clause, params = Slice(start=start, end=end).where()
    statements = backfill_statements(store.ctx, clause, kinds=("fingerprints", "groups"))
    statements += open_backfill_statements(store.ctx, clause)
    for statement in statements:
        store.client.command(statement, parameters=params)
    return len(statements)
