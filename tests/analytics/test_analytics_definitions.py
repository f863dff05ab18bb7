"""The definitions are the one source: every shown metric is defined there, and the README says so."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from retrylens.analytics import alerts, definitions
from retrylens.analytics.definitions import (
    COUNTS,
    RATES,
    SUMS,
    VALUES,
    Metrics,
    metrics_from,
    metrics_table,
)

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_metrics_table_in_the_readme_is_current() -> None:
    table = README.split("<!-- metrics-table:start -->", 1)[1].split("<!-- metrics-table:end -->", 1)[0]
    assert table.strip().splitlines() == metrics_table()


def test_every_metric_field_has_exactly_one_definition() -> None:
    defined = [d.name for group in (COUNTS, SUMS, VALUES, RATES) for d in group]
    assert sorted(defined) == sorted(f.name for f in fields(Metrics)) and len(set(defined)) == len(defined)
    assert all(r.numerator in defined and r.denominator in defined for r in RATES)


def test_every_metric_is_alertable() -> None:
    assert alerts.METRIC_NAMES == definitions.METRIC_NAMES


def test_the_four_outcomes_add_up_to_the_tasks_and_rates_follow_the_counts() -> None:
    m = metrics_from({"successful_without_retry": 5, "successful_with_retry": 2, "failed_with_retry": 2,
                      "failed_without_retry": 1, "calls": 12, "retries": 4, "failures": 6, "handoffs": 1}, {})
    assert (m.tasks, m.tasks_retried, m.tasks_recovered) == (10, 4, 2)
    assert (m.retry_rate, m.handoff_rate, m.recovery_rate, m.degradation_rate) == (4 / 12, 1 / 6, 2 / 4, 0.0)
    assert metrics_from({}, {}) == Metrics()
