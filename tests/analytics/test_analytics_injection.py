"""Hostile filter values are plain strings: no error text leaks, no other project's data."""

from __future__ import annotations

import pytest
from analytics_eventset import load

from retrylens.analytics.failure_groups import failure_groups
from retrylens.analytics.filters import Slice
from retrylens.analytics.fingerprints import fingerprint_stats, top_failing_fingerprints
from retrylens.analytics.metrics import (
    failure_type_distribution,
    metrics_by,
    metrics_summary,
    metrics_trend,
    recent_handoffs,
    task_costs,
)
from retrylens.analytics.patterns import failure_patterns
from retrylens.analytics.pollution import pollution_report, task_pollution

pytestmark = pytest.mark.clickhouse

HOSTILE = [
    "alpha' OR '1'='1",
    "x'; DROP TABLE events; --",
    "beta\\' OR 1=1 --",
    "{project:String}",
    "[[db]]",
    "') UNION ALL SELECT * FROM system.tables --",
]
FIELDS = ["project", "agent", "phase", "error_type", "policy_version"]


@pytest.mark.parametrize("value", HOSTILE)
def test_every_slice_filter_matches_nothing(store, value):
    load(store)
    for field in FIELDS:
        _matches_nothing(store, Slice(**{field: value}))
        if field != "project":
            _matches_nothing(store, Slice(project="alpha", **{field: value}))


def _matches_nothing(store, where):
    for source in ("rollup", "raw"):
        assert metrics_summary(store, where, source=source).calls == 0
        assert metrics_by(store, "agent", where, source=source) == []
        assert metrics_trend(store, where, source=source) == []
    assert failure_type_distribution(store, where) == []
    assert task_costs(store, where) == [] and recent_handoffs(store, where) == []
    assert task_pollution(store, where) == [] and pollution_report(store, where).tasks == 0
    assert failure_patterns(store, where, min_support=1) == []


@pytest.mark.parametrize("value", HOSTILE)
def test_project_and_fingerprint_lookups_match_nothing(store, value):
    load(store)
    assert failure_groups(store, value, include_noise=True) == []
    assert failure_groups(store, "alpha", error_type=value) == []
    assert top_failing_fingerprints(store, value) == []
    assert fingerprint_stats(store, value, value).failures == 0
    assert store.count_distinct_events() > 0  # nothing was dropped


def test_dimension_and_bucket_names_are_whitelisted(store):
    with pytest.raises(ValueError, match="unknown dimension"):
        metrics_by(store, "project; DROP TABLE events")
    with pytest.raises(ValueError, match="unknown time bucket"):
        metrics_trend(store, bucket="1h'); DROP TABLE events; --")
