"""The task timeline's labels fit and stay level (issue 37: the last attempt's label was cut at the
figure's right edge and plotly turned short backoff labels on their side); the failure-groups chart
of one day spans days. Chromium's rendering at 1280 and 1600 px is checked in
``test_dashboard_hostile_browser.py``; these pin the layout rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from retrylens.dashboard import charts
from retrylens.dashboard.story import Attempt, TaskStory

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _story(gap_ms: int, *, last_ms: int = 900, error: str = "context_overflow") -> TaskStory:
    first = Attempt(attempt=1, correlation_id="c1", started=T0, ended=T0 + timedelta(milliseconds=900),
                    status="failed", error_type="timeout")
    start = T0 + timedelta(milliseconds=900 + gap_ms)
    last = Attempt(attempt=2, correlation_id="c2", started=start, ended=start + timedelta(milliseconds=last_ms),
                   status="failed", error_type=error)
    return TaskStory(project="shop", task_id="t1", attempts=[first, last])


def _trace(figure, name):
    return next(t for t in figure.data if t.name == name)


def _ms(value) -> float:
    return (datetime.fromisoformat(str(value)) - T0).total_seconds() * 1000


def test_the_axis_leaves_room_for_the_last_attempts_label_after_its_bar():
    figure = charts.task_waterfall(_story(2000))
    bars = _trace(figure, "attempts")
    left, right = (_ms(v) for v in figure.layout.xaxis.range)
    last_end = 900 + 2000 + 900
    label_px = charts.CHAR_PX * len(bars.text[-1]) + 8
    room_px = (right - last_end) / (right - left) * charts.PLOT_PX
    assert room_px >= label_px - 0.5  # (µs rounding) at the narrowest plot the dashboard gives the timeline
    assert bars.textposition == "outside" and bars.textangle == 0


def test_a_backoff_too_short_to_name_inside_its_bar_leads_the_next_attempts_label():
    figure = charts.task_waterfall(_story(40))
    backoff, bars = _trace(figure, "backoff"), _trace(figure, "attempts")
    assert list(backoff.text) == [""] and list(backoff.hovertext) == ["backoff 40 ms"]
    assert bars.text[1].strip() == "after backoff 40 ms: 900 ms · failed (context_overflow)"
    assert backoff.textangle == 0 and figure.layout.uniformtext.mode == "hide"  # never turned or shrunk


def test_a_wide_backoff_is_named_inside_its_bar():
    figure = charts.task_waterfall(_story(4000))
    assert list(_trace(figure, "backoff").text) == ["backoff 4.0 s"]
    assert _trace(figure, "attempts").text[1].strip() == "900 ms · failed (context_overflow)"


def test_label_room_grows_the_axis_only_as_far_as_the_longest_label_needs():
    assert charts.label_room([(100.0, "")], 0.0, 1000.0) == 1000.0  # fits already
    needed = charts.label_room([(1000.0, "x" * 40)], 0.0, 1000.0, plot_px=600)
    share = (charts.CHAR_PX * 40 + 8) / 600
    assert abs((needed - 1000.0) / needed - share) < 1e-9


def test_failure_groups_of_one_day_span_the_days_around_it_not_milliseconds():
    """The groups chart of a fresh project labelled its axis "23:59:59.999" (seen in Chromium)."""
    from datetime import date

    figure = charts.group_trends({"disk full": [(date(2026, 12, 7), 3)], "timeout": [(date(2026, 12, 7), 1)]})
    assert [str(v) for v in figure.layout.xaxis.range] == ["2026-12-06", "2026-12-08"]
