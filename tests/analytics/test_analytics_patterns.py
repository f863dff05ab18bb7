"""Failure patterns find what the synthetic generator planted, in plain words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from retrylens.analytics.filters import Slice
from retrylens.analytics.patterns import failure_patterns
from retrylens.analytics.synthetic import synthetic_events
from retrylens.store.event_table import event_row

pytestmark = pytest.mark.clickhouse


@pytest.fixture
def synthetic_store(store):
    noon = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=1)
    events = synthetic_events(1500, seed=5, project="syn", now=noon)
    store.insert_rows([event_row(e, topic="syn", partition=0, offset=i) for i, e in enumerate(events)])
    return store


def test_planted_risk_factors_are_found_with_support_and_lift(synthetic_store):
    found = {p.item: p for p in failure_patterns(synthetic_store, Slice(project="syn"), min_support=20, limit=500)}
    assert found["size=long"].lift > 1.5
    assert found["kw:legacy"].lift > 1.3
    assert "kw:summary" not in found  # lowers failure
    pair = found["kw:invoice&kw:refund"]
    assert pair.lift > found.get("kw:invoice", pair).lift or "kw:invoice" not in found
    assert pair.description.startswith("inputs mentioning both 'invoice' and 'refund' fail or need a human")
    assert f"({pair.failures} of {pair.support} tasks)" in pair.description


def test_phase_target_speaks_of_that_phase(synthetic_store):
    found = failure_patterns(synthetic_store, Slice(project="syn"), phase="planning", min_support=20)
    assert found[0].item == "agent=planner" and "fail in planning" in found[0].description


def test_no_finished_tasks_no_patterns(store):
    assert failure_patterns(store, Slice(project="nobody")) == []
