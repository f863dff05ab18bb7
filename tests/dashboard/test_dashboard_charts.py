"""The figures of the pages, read as data (pure functions: points in, plotly figure out)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from retrylens.analytics.metrics import Metrics, TrendPoint
from retrylens.dashboard import charts

T0 = datetime(2026, 12, 1, 0, tzinfo=UTC)


def _point(hour: int, calls: int, retries: int, successes: int, failures: int, handoffs: int) -> TrendPoint:
    metrics = Metrics(calls=calls, retries=retries, retry_successes=successes, failures=failures, handoffs=handoffs,
                      retry_rate=retries / calls if calls else None,
                      retry_success_rate=successes / retries if retries else None,
                      handoff_rate=handoffs / failures if failures else None)
    return TrendPoint(T0 + timedelta(hours=hour), metrics)


#: Two busy hours around two hours with one or two tasks (one retry that worked, one that did not).
POINTS = [_point(0, 100, 40, 20, 50, 10), _point(1, 2, 1, 1, 1, 0), _point(2, 1, 1, 0, 1, 1),
          _point(3, 100, 40, 20, 50, 10)]


def _trace(figure, name: str):
    return next(t for t in figure.data if t.name == name)


def test_retry_success_on_tiny_buckets_is_merged_not_a_jump_between_0_and_100_percent():
    success = _trace(charts.retry_trend(POINTS), "retry success rate")
    assert all(0.3 <= y <= 0.7 for y in success.y), list(success.y)
    assert sum(1 for _ in success.y) == 2  # the tiny hours joined the next busy one


def test_every_trend_point_names_the_counts_behind_it():
    figure = charts.retry_trend(POINTS)
    success = _trace(figure, "retry success rate")
    assert success.text[0] == "20 of 40 retries"
    assert success.text[1] == "21 of 42 retries · 3 buckets merged"
    assert _trace(figure, "retry rate").text[0] == "40 of 100 calls"
    assert _trace(figure, "hand-off rate").text[-1] == "11 of 52 failed attempts · 3 buckets merged"


def test_a_trend_made_only_of_tiny_buckets_still_shows_one_point_with_its_count():
    success = _trace(charts.retry_trend(POINTS[1:3]), "retry success rate")
    assert list(success.y) == [0.5] and list(success.text) == ["1 of 2 retries · 2 buckets merged"]


def test_buckets_without_a_denominator_plot_nothing():
    empty = [_point(0, 3, 0, 0, 0, 0)]
    assert list(_trace(charts.retry_trend(empty), "retry success rate").y) == []


# --- the task's waterfall -----------------------------------------------------------------------

def _story():
    from retrylens.dashboard.story import Attempt, TaskStory

    first = Attempt(attempt=1, correlation_id="c1", started=T0, ended=T0 + timedelta(milliseconds=1200),
                    status="failed", error_type="timeout", decision="retry", backoff_ms=2000, latency_ms=1200,
                    side_effects=[{"ts": T0 + timedelta(milliseconds=500), "tool": "refund", "status": "applied",
                                   "idempotency_key": "k1"}])
    second = Attempt(attempt=2, correlation_id="c2", started=T0 + timedelta(milliseconds=3200),
                     ended=T0 + timedelta(milliseconds=4000), status="failed", error_type="timeout",
                     decision="handoff_human", latency_ms=800)
    handoff = {"kind": "handoff", "ts": T0 + timedelta(milliseconds=4100), "decision_reason": "cap 2 reached"}
    return TaskStory(project="shop", task_id="t1", attempts=[first, second], handoffs=[handoff])


def test_task_waterfall_draws_each_attempt_as_a_bar_with_its_duration():
    bars = _trace(charts.task_waterfall(_story()), "attempts")
    assert [str(b) for b in bars.base] == [str(T0), str(T0 + timedelta(milliseconds=3200))]
    assert list(bars.x) == [1200, 800]
    assert list(bars.y) == ["attempt 1", "attempt 2"]
    assert [t.strip() for t in bars.text] == ["1.2 s · failed (timeout)", "800 ms · failed (timeout)"]


def test_task_waterfall_shows_the_backoff_gap_side_effects_and_the_handoff():
    figure = charts.task_waterfall(_story())
    backoff = _trace(figure, "backoff")
    assert [str(b) for b in backoff.base] == [str(T0 + timedelta(milliseconds=1200))]
    assert list(backoff.x) == [2000] and list(backoff.text) == ["backoff 2.0 s"]
    effects = _trace(figure, "side effects")
    assert [str(x) for x in effects.x] == [str(T0 + timedelta(milliseconds=500))]
    assert "refund applied" in effects.text[0] and "k1" in effects.text[0]
    handoff = _trace(figure, "hand-off")
    assert [str(x) for x in handoff.x] == [str(T0 + timedelta(milliseconds=4100))]
    assert "cap 2 reached" in handoff.text[0]
    assert figure.layout.xaxis.type == "date"


def _span(figure) -> timedelta:
    lo, hi = figure.layout.xaxis.range
    return datetime.fromisoformat(str(hi)) - datetime.fromisoformat(str(lo))


def test_a_trend_of_one_bucket_spans_that_bucket_not_a_millisecond():
    """One bucket of data (a demo's burst, a fresh project) made plotly zoom its time axis onto
    one instant, labelled in milliseconds ("09:59:59.999"): the axis spans the bucket's width."""
    (point,) = POINTS[:1]
    for figure in (charts.retry_trend([point], width=timedelta(hours=1)),
                   charts.retry_cost([point], width=timedelta(hours=1))):
        assert figure.layout.xaxis.range is not None, figure.layout.title.text
        assert _span(figure) == timedelta(hours=1), figure.layout.title.text
    assert _span(charts.retry_trend([point], width=timedelta(days=1))) == timedelta(days=1)


def test_a_trend_of_several_buckets_keeps_its_own_range():
    figure = charts.retry_trend(POINTS, width=timedelta(hours=1))
    assert _span(figure) == timedelta(hours=3)


def test_a_drift_chart_of_one_bucket_spans_that_bucket():
    """Pre-checks of a fresh model fill one bucket: the axis spans its hours, not a millisecond."""
    point = {"bucket": T0, "bucket_hours": 6, "judged": 40, "mean_risk": 0.1, "observed": 0.12,
             "precheck_auc": 0.7, "precheck_brier": 0.1}
    assert _span(charts.precheck_drift([point])) == timedelta(hours=6)
    over_api = {**point, "bucket": T0.isoformat()}  # the API road's bucket is an ISO string
    assert _span(charts.precheck_drift([over_api])) == timedelta(hours=6)
