"""The pre-check monitor's figures against their definitions, with no store (mutation
target ``precheck_monitor``): AUC as the share of (failed, succeeded) pairs ranked right,
ties counting half; Brier, mean risk, observed rate and their gap by hand; pre-checks whose
task has not ended are not judged."""

from __future__ import annotations

import random

import pytest

from retrylens.analytics.prechecks import auc, judge, segment_calibration_error

NONE = {"judged": 0, "mean_risk": None, "observed": None, "calibration_gap": None, "calibration_error": None,
        "precheck_auc": None, "precheck_brier": None}


def _pairs_auc(labels: list[int], scores: list[float]) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def test_auc_is_the_share_of_pairs_ranked_right_with_ties_as_half() -> None:
    assert auc([1, 0, 1, 0, 1], [0.9, 0.1, 0.4, 0.4, 0.2]) == 0.75
    assert auc([0, 1], [0.5, 0.5]) == 0.5 and auc([1, 0], [0.1, 0.9]) == 0.0 and auc([1, 0], [0.9, 0.1]) == 1.0
    rng = random.Random(5)
    for n in (2, 3, 7, 40):
        for _ in range(25):
            labels = [rng.randint(0, 1) for _ in range(n)]
            labels[0], labels[-1] = 1, 0
            scores = [rng.choice((0.1, 0.3, 0.5, 0.7)) for _ in range(n)]  # many ties
            assert auc(labels, scores) == pytest.approx(_pairs_auc(labels, scores), abs=1e-12)


def test_tied_risks_read_from_rows_are_ties_though_they_are_distinct_objects() -> None:
    """Risks come from stored rows as separate float objects: equal values tie by value."""
    tied = [float(text) for text in ("0.5", "0.5", "0.5")]
    assert tied[0] is not tied[1]
    assert auc([1, 0, 0], tied) == 0.5 and auc([0, 0, 1], tied) == 0.5


def test_auc_needs_both_classes() -> None:
    assert auc([], []) is None and auc([1, 1], [0.2, 0.3]) is None and auc([0, 0, 0], [0.1, 0.2, 0.3]) is None


def test_judge_figures_by_hand_and_unfinished_tasks_left_out() -> None:
    rows = [{"risk": 0.8, "failed": True}, {"risk": 0.2, "failed": False}, {"risk": 0.6, "failed": 0},
            {"risk": 0.1, "failed": 1}, {"risk": 0.99, "failed": None}, {"risk": 0.99}]
    figures = judge(rows)
    assert figures["judged"] == 4
    assert figures["mean_risk"] == pytest.approx(0.425) and figures["observed"] == 0.5
    assert figures["calibration_gap"] == pytest.approx(0.075)
    assert figures["precheck_brier"] == pytest.approx((0.04 + 0.04 + 0.36 + 0.81) / 4)
    assert figures["precheck_auc"] == 0.5
    assert figures["calibration_error"] is None  # fewer judged than segments
    assert judge([]) == NONE and judge([{"risk": 0.5, "failed": None}]) == NONE


def test_judge_calibration_error_over_equal_count_segments() -> None:
    rng = random.Random(9)
    rows = [{"risk": rng.random(), "failed": rng.random() < 0.3} for _ in range(40)]
    figures = judge(rows)
    labels = [int(r["failed"]) for r in rows]
    risks = [r["risk"] for r in rows]
    assert figures["calibration_error"] == segment_calibration_error(labels, risks)
    assert figures["calibration_error"] is not None and figures["calibration_error"] > 0
    assert figures["precheck_auc"] == pytest.approx(_pairs_auc(labels, risks))
