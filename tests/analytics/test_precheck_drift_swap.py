"""A swap of which inputs are risky is caught at once, though the mean risk still equals the observed rate.

Planted: the model says 0.8 for kind A and 0.1 for kind B, half the tasks each. Before the
swap A fails 80 % and B 10 %; after it A fails 10 % and B 80 %. The mean risk (0.45) equals
the observed rate (0.45) both times, so the calibration gap stays 0; the per-segment
calibration error must go from ~0 to over 0.5, and the model page must warn.
"""

from __future__ import annotations

import random

from retrylens.analytics.alerts import RULE_METRICS
from retrylens.analytics.prechecks import judge
from retrylens.dashboard.page_model import drift_warning


def _rows(*, swapped: bool, n: int = 400, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        kind_a = i % 2 == 0
        risk = 0.8 if kind_a else 0.1
        fails = (0.1 if kind_a else 0.8) if swapped else risk
        rows.append({"risk": risk, "failed": rng.random() < fails})
    return rows


def test_the_calibration_gap_misses_a_swap_and_the_segment_error_catches_it() -> None:
    before, after = judge(_rows(swapped=False)), judge(_rows(swapped=True))
    assert before["calibration_gap"] < 0.05 and after["calibration_gap"] < 0.05
    assert before["calibration_error"] < 0.06
    assert after["calibration_error"] > 0.5  # 0.7 in four of five segments; the middle one holds both kinds


def test_an_alert_rule_can_watch_the_segment_error() -> None:
    assert "calibration_error" in RULE_METRICS


def test_the_model_page_warns_of_the_swap_by_default() -> None:
    bucket = {"bucket": "2026-12-01 10:00", "judged": 400}
    assert drift_warning([{**bucket, **judge(_rows(swapped=False))}]) == ""
    assert "which inputs are risky may have changed" in drift_warning([{**bucket, **judge(_rows(swapped=True))}])
