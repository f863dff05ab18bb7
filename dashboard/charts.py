"""Plotly figures of the pages. Pure: data in, figure out (tests can inspect them).

Every stored name or message in a label goes through :func:`~.text.chart` (Plotly reads
``<a href>`` and ``<br>`` in labels as markup)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

import plotly.graph_objects as go

from retrylens.analytics.metrics import ErrorTypeShare, TrendPoint

from .story import TaskStory
from .text import chart

_LAYOUT = {"margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "height": 320,
           "legend": {"orientation": "h", "y": -0.2}}


def _figure(title: str) -> go.Figure:
    figure = go.Figure()
    figure.update_layout(title=title, **_LAYOUT)
    return figure


#: A trend's rate rests on at least this many cases: a bucket with fewer (one task at night)
#: is merged with the buckets after it, instead of plotting a jump to 0 % or 100 %.
MIN_CASES = 5
#: rate name → (line name, numerator count, denominator count, what the denominator counts)
_TREND_RATES = (
    ("retry rate", "retries", "calls", "calls"),
    ("retry success rate", "retry_successes", "retries", "retries"),
    ("hand-off rate", "handoffs", "failures", "failed attempts"),
)


def pooled_rate(points: Sequence[TrendPoint], numerator: str, denominator: str, noun: str,
                min_cases: int = MIN_CASES) -> list[tuple[Any, float, str]]:
    """``(bucket, rate, "n of d <noun>")`` per plotted point, oldest first.

    Consecutive buckets are added up until their denominator reaches ``min_cases``; the
    point sits at the last bucket of its group. A short tail joins the point before it (or
    stands alone, with its count, when there is none). Buckets with nothing to divide by
    add nothing.
    """
    groups: list[list[TrendPoint]] = []
    current: list[TrendPoint] = []
    for point in points:
        current.append(point)
        if sum(getattr(p.metrics, denominator) for p in current) >= min_cases:
            groups.append(current)
            current = []
    if current:
        if groups:
            groups[-1] += current
        else:
            groups.append(current)
    out = []
    for group in groups:
        num = sum(getattr(p.metrics, numerator) for p in group)
        den = sum(getattr(p.metrics, denominator) for p in group)
        if den == 0:
            continue
        used = sum(1 for p in group if getattr(p.metrics, denominator))
        merged = f" · {used} buckets merged" if used > 1 else ""
        last = max(p.bucket for p in group if getattr(p.metrics, denominator))
        out.append((last, num / den, f"{num:,} of {den:,} {noun}{merged}"))
    return out


def _time_axis(figure: go.Figure, points: Sequence[TrendPoint], width: timedelta | None,
               *, pin_range: bool = True) -> None:
    """The x axis spans the data's buckets (``pin_range``; else plotly's own margins, as bars
    need); one bucket spans its own ``width`` around it.

    Why: with one instant of data plotly zooms onto it and labels the axis in milliseconds
    ("09:59:59.999"), as the demo's one-burst store and every fresh project showed."""
    buckets = sorted({p.bucket for p in points})
    if len(buckets) > 1:
        if pin_range:
            figure.update_xaxes(range=[buckets[0], buckets[-1]])
    elif buckets and width is not None:
        figure.update_xaxes(range=[buckets[0] - width / 2, buckets[0] + width / 2])


def retry_trend(points: Sequence[TrendPoint], width: timedelta | None = None) -> go.Figure:
    """Retry rate, retry success rate and hand-off rate per time bucket (tiny buckets merged,
    every point's counts in its hover text); ``width``: the bucket size."""
    figure = _figure("Retry rate and retry success over time")
    for name, numerator, denominator, noun in _TREND_RATES:
        rates = pooled_rate(points, numerator, denominator, noun)
        figure.add_trace(go.Scatter(
            x=[r[0] for r in rates], y=[r[1] for r in rates], text=[r[2] for r in rates], name=name,
            mode="lines+markers", connectgaps=False, hovertemplate="%{y:.0%} · %{text}<extra>" + name + "</extra>",
        ))
    figure.update_yaxes(tickformat=".0%", rangemode="tozero")
    _time_axis(figure, points, width)  # the whole range, also where merging left a single point
    return figure


def retry_cost(points: Sequence[TrendPoint], width: timedelta | None = None) -> go.Figure:
    """USD spent on retry attempts and on failed attempts per time bucket (``width``: its size)."""
    figure = _figure("Cost of retries (USD)")
    x = [p.bucket for p in points]
    figure.add_trace(go.Bar(x=x, y=[p.metrics.retry_cost_usd for p in points], name="retry attempts"))
    figure.add_trace(go.Bar(x=x, y=[p.metrics.failed_cost_usd for p in points], name="failed attempts"))
    figure.update_layout(barmode="group")
    _time_axis(figure, points, width, pin_range=False)
    return figure


def failure_types(shares: Sequence[ErrorTypeShare]) -> go.Figure:
    """Failed attempts per error type, most frequent on top."""
    figure = _figure("Failure types")
    ordered = list(reversed(shares))
    figure.add_trace(go.Bar(
        x=[s.failures for s in ordered], y=[chart(s.error_type) for s in ordered], orientation="h",
        text=[f"{s.share:.0%}" for s in ordered], textposition="auto", name="failed attempts",
    ))
    figure.update_layout(height=max(240, 40 + 28 * len(shares)))
    return figure


def group_trends(series: dict[str, list[tuple[date, int]]]) -> go.Figure:
    """Failures per day of each failure group."""
    figure = _figure("Failures per day, by group")
    for name, days in series.items():
        figure.add_trace(go.Scatter(x=[d for d, _ in days], y=[n for _, n in days], name=chart(name[:60]),
                                    mode="lines+markers"))
    seen = {d for days in series.values() for d, _ in days}
    if len(seen) == 1:  # one day of failures: span the days around it, not one instant in milliseconds
        (day,) = seen
        figure.update_xaxes(range=[day - timedelta(days=1), day + timedelta(days=1)])
    return figure


def calibration(tables: dict[str, list[dict[str, float]]]) -> go.Figure:
    """Observed failure rate against predicted risk per bin, with the perfect diagonal."""
    figure = _figure("Calibration (test set)")
    figure.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfectly calibrated",
                                line={"dash": "dot", "color": "grey"}))
    for name, rows in tables.items():
        figure.add_trace(go.Scatter(
            x=[r["mean_predicted"] for r in rows], y=[r["observed"] for r in rows], name=chart(name),
            mode="lines+markers", text=[f"n={int(r['n'])}" for r in rows],
        ))
    figure.update_xaxes(title="predicted risk", range=[0, 1])
    figure.update_yaxes(title="observed failure rate", range=[0, 1])
    return figure


def feature_weights(weights: Sequence[tuple[str, float]]) -> go.Figure:
    """Log-odds weight of each named feature (positive = riskier)."""
    figure = _figure("Feature weights (log-odds per unit)")
    ordered = sorted(weights, key=lambda item: item[1])
    figure.add_trace(go.Bar(x=[w for _, w in ordered], y=[chart(n) for n, _ in ordered], orientation="h",
                            marker={"color": ["#d62728" if w > 0 else "#2ca02c" for _, w in ordered]}))
    figure.update_layout(height=max(260, 40 + 22 * len(weights)))
    return figure


_STATUS_COLOURS = {"succeeded": "#2ca02c", "failed": "#d62728", "running": "#7f7f7f"}


def _duration(value_ms: float) -> str:
    return f"{value_ms / 1000:.1f} s" if value_ms >= 1000 else f"{value_ms:.0f} ms"


#: The narrowest plot area the task view gets (a 1280 px window with the sidebar open), and the
#: width of one character of a bar label there: what decides whether a label fits.
PLOT_PX = 760
CHAR_PX = 7.0
#: A label never takes more than this share of the axis (a very long error type is cut by plotly).
_MAX_LABEL_SHARE = 0.6
#: Room between a bar's end and its label: a side effect's diamond at the end of an attempt hid
#: the label's first letters.
LABEL_GAP = "\u00a0" * 3


def _px(text: str) -> float:
    return CHAR_PX * len(text) + 8


def label_room(ends: Sequence[tuple[float, str]], left: float, right: float, plot_px: float = PLOT_PX) -> float:
    """The axis end (ms from the task start) that leaves room for each label written after its bar.

    ``ends``: (where a bar ends, its label). A label of ``w`` px after a bar ending at ``e`` fits
    when ``(R - e) / (R - left) * plot_px >= w``, i.e. ``R >= (e - a·left) / (1 - a)`` with
    ``a = w / plot_px``. Why: the last attempt's label was drawn past the axis and cut at the
    figure's right edge (issue 37)."""
    needed = right
    for end, text in ends:
        share = min(_px(text) / plot_px, _MAX_LABEL_SHARE)
        needed = max(needed, (end - share * left) / (1 - share))
    return needed


def task_waterfall(story: TaskStory) -> go.Figure:
    """A task as a waterfall: one bar per attempt from its start to its end, its duration and status
    written after the bar (level, never cut: the axis leaves room for the longest), the backoff gap
    before the next attempt as a pale bar named inside it when the name fits at :data:`PLOT_PX`
    (else the name leads the attempt's own label, instead of a label plotly turned on its side or
    shrank), side effects as diamonds on their attempt's row and the hand-off as a star on a row of
    its own. Hovering any bar shows its whole text."""
    figure = _figure("Timeline")
    timed = [a for a in story.attempts if a.started or a.ended]
    bars = [(a, a.started or a.ended, a.ended or a.started) for a in timed]
    gaps = {nxt.label: (a.ended, nxt.started) for (a, _, _), (nxt, _, _) in zip(bars, bars[1:], strict=False)
            if a.ended and nxt.started and nxt.started > a.ended}
    handoffs = [h for h in story.handoffs if h.get("ts")]
    instants = [t for _, s, e in bars for t in (s, e)] + [h["ts"] for h in handoffs] + [
        e["ts"] for a in timed for e in a.side_effects if e.get("ts")]
    origin = min(instants) if instants else None

    def at(t: datetime) -> float:
        return (t - origin).total_seconds() * 1000 if origin is not None else 0.0

    span = max((at(t) for t in instants), default=0.0) or 1.0
    fits = {label: _px(f"backoff {_duration(at(e) - at(s))}") <= (at(e) - at(s)) / span * PLOT_PX * 0.8
            for label, (s, e) in gaps.items()}
    shown = []
    for a, s, e in bars:
        text = f"{_duration((e - s).total_seconds() * 1000)} · {a.status}" + (f" ({a.error_type})" if a.error_type else "")
        if a.label in gaps and not fits[a.label]:
            gap_s, gap_e = gaps[a.label]
            text = f"after backoff {_duration((gap_e - gap_s).total_seconds() * 1000)}: {text}"
        shown.append(LABEL_GAP + text)
    figure.add_trace(go.Bar(
        name="attempts", orientation="h", y=[a.label for a, _, _ in bars], base=[s for _, s, _ in bars],
        x=[max((e - s).total_seconds() * 1000, 1) for _, s, e in bars], text=[chart(t) for t in shown],
        marker={"color": [_STATUS_COLOURS.get(a.status, "#7f7f7f") for a, _, _ in bars]},
        textposition="outside", textangle=0, cliponaxis=False, hovertemplate="%{y}: %{text}<extra></extra>",
    ))
    figure.add_trace(go.Bar(
        name="backoff", orientation="h", y=list(gaps), base=[s for s, _ in gaps.values()],
        x=[(e - s).total_seconds() * 1000 for s, e in gaps.values()],
        text=[f"backoff {_duration((e - s).total_seconds() * 1000)}" if fits[label] else ""
              for label, (s, e) in gaps.items()],
        hovertext=[f"backoff {_duration((e - s).total_seconds() * 1000)}" for s, e in gaps.values()],
        marker={"color": "rgba(127,127,127,0.25)", "line": {"color": "#7f7f7f", "width": 1}},
        textposition="inside", insidetextanchor="middle", textangle=0, hovertemplate="%{hovertext}<extra></extra>",
    ))
    effects = [(a.label, e) for a in timed for e in a.side_effects]
    figure.add_trace(go.Scatter(
        name="side effects", mode="markers", y=[label for label, _ in effects], x=[e["ts"] for _, e in effects],
        marker={"symbol": "diamond", "size": 12, "color": "#9467bd", "line": {"color": "white", "width": 1}},
        text=[chart(f"{e.get('tool')} {e.get('status')} · key {e.get('idempotency_key') or '—'}") for _, e in effects],
        hovertemplate="%{text}<extra>side effect</extra>",
    ))
    figure.add_trace(go.Scatter(
        name="hand-off", mode="markers", y=["hand-off"] * len(handoffs), x=[h["ts"] for h in handoffs],
        marker={"symbol": "star", "size": 16, "color": "#ff7f0e"},
        text=[chart(h.get("decision_reason") or "handed to a human") for h in handoffs],
        hovertemplate="%{text}<extra>hand-off</extra>",
    ))
    rows = [a.label for a in timed] + (["hand-off"] if handoffs else [])
    figure.update_yaxes(categoryorder="array", categoryarray=list(reversed(rows)))
    figure.update_xaxes(type="date")
    if origin is not None:
        left = -0.02 * span
        right = label_room([(at(e), t) for (_, _, e), t in zip(bars, shown, strict=True)], left, span * 1.02)
        figure.update_xaxes(range=[origin + timedelta(milliseconds=left), origin + timedelta(milliseconds=right)])
    # A label that still does not fit is hidden (its text is in the hover), never shrunk or turned.
    figure.update_layout(barmode="overlay", height=max(240, 130 + 48 * len(rows)),
                         legend={"orientation": "h", "y": -0.35}, uniformtext={"minsize": 11, "mode": "hide"})
    return figure


def policy_intervals(points: Sequence[dict[str, Any]], label: str) -> go.Figure:
    """One metric per policy: the point estimate with its 95 % interval as an error bar."""
    figure = _figure(f"{chart(label)}: estimate and 95 % CI per policy")
    figure.add_trace(go.Scatter(
        x=[p["value"] for p in points], y=[chart(p["policy"]) for p in points], mode="markers", name=chart(label),
        error_x={"type": "data", "symmetric": False, "array": [p["hi"] - p["value"] for p in points],
                 "arrayminus": [p["value"] - p["lo"] for p in points]}))
    return figure


def precheck_drift(points: Sequence[dict[str, Any]]) -> go.Figure:
    """Per time bucket: mean predicted risk vs observed failure rate, ROC-AUC and Brier score."""
    figure = _figure("Risk model on real outcomes over time")
    x = [p["bucket"] for p in points]
    # how many outcomes stand behind each point: a bucket of a dozen tasks is a noisy AUC
    behind = [f"{p.get('judged', 0):,} pre-checked tasks ended, started in this "
              f"{p.get('bucket_hours', 24)} h" for p in points]
    for name, key in (("mean predicted risk", "mean_risk"), ("observed failure rate", "observed"),
                      ("calibration error by risk segment", "calibration_error"),
                      ("ROC-AUC", "precheck_auc"), ("Brier score", "precheck_brier")):
        figure.add_trace(go.Scatter(x=x, y=[p.get(key) for p in points], name=name, mode="lines+markers",
                                    text=behind, hovertemplate="%{y:.3f}<br>%{text}"))
    figure.update_yaxes(range=[0, 1])
    if len({str(b) for b in x}) == 1:  # one bucket: span its hours, not one instant in milliseconds
        at = x[0] if isinstance(x[0], datetime) else datetime.fromisoformat(str(x[0]))
        half = timedelta(hours=points[0].get("bucket_hours") or 24) / 2
        figure.update_xaxes(range=[at - half, at + half])
    return figure
