"""Plotly figures of the pages. Pure: data in, figure out (tests can inspect them)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

import plotly.graph_objects as go

from retrylens.analytics.metrics import ErrorTypeShare, TrendPoint

_LAYOUT = {"margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "height": 320,
           "legend": {"orientation": "h", "y": -0.2}}


def _figure(title: str) -> go.Figure:
    figure = go.Figure()
    figure.update_layout(title=title, **_LAYOUT)
    return figure


def retry_trend(points: Sequence[TrendPoint]) -> go.Figure:
    """Retry rate, retry success rate and hand-off rate per time bucket."""
    figure = _figure("Retry rate and retry success over time")
    x = [p.bucket for p in points]
    for name, attr in (("retry rate", "retry_rate"), ("retry success rate", "retry_success_rate"),
                       ("hand-off rate", "handoff_rate")):
        figure.add_trace(go.Scatter(x=x, y=[getattr(p.metrics, attr) for p in points], name=name,
                                    mode="lines+markers", connectgaps=False))
    figure.update_yaxes(tickformat=".0%", rangemode="tozero")
    return figure


def retry_cost(points: Sequence[TrendPoint]) -> go.Figure:
    """USD spent on retry attempts and on failed attempts per time bucket."""
    figure = _figure("Cost of retries (USD)")
    x = [p.bucket for p in points]
    figure.add_trace(go.Bar(x=x, y=[p.metrics.retry_cost_usd for p in points], name="retry attempts"))
    figure.add_trace(go.Bar(x=x, y=[p.metrics.failed_cost_usd for p in points], name="failed attempts"))
    figure.update_layout(barmode="group")
    return figure


def failure_types(shares: Sequence[ErrorTypeShare]) -> go.Figure:
    """Failed attempts per error type, most frequent on top."""
    figure = _figure("Failure types")
    ordered = list(reversed(shares))
    figure.add_trace(go.Bar(
        x=[s.failures for s in ordered], y=[s.error_type for s in ordered], orientation="h",
        text=[f"{s.share:.0%}" for s in ordered], textposition="auto", name="failed attempts",
    ))
    figure.update_layout(height=max(240, 40 + 28 * len(shares)))
    return figure


def group_trends(series: dict[str, list[tuple[date, int]]]) -> go.Figure:
    """Failures per day of each failure group."""
    figure = _figure("Failures per day, by group")
    for name, days in series.items():
        figure.add_trace(go.Scatter(x=[d for d, _ in days], y=[n for _, n in days], name=name[:60],
                                    mode="lines+markers"))
    return figure


def calibration(tables: dict[str, list[dict[str, float]]]) -> go.Figure:
    """Observed failure rate against predicted risk per bin, with the perfect diagonal."""
    figure = _figure("Calibration (test set)")
    figure.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfectly calibrated",
                                line={"dash": "dot", "color": "grey"}))
    for name, rows in tables.items():
        figure.add_trace(go.Scatter(
            x=[r["mean_predicted"] for r in rows], y=[r["observed"] for r in rows], name=name,
            mode="lines+markers", text=[f"n={int(r['n'])}" for r in rows],
        ))
    figure.update_xaxes(title="predicted risk", range=[0, 1])
    figure.update_yaxes(title="observed failure rate", range=[0, 1])
    return figure


def feature_weights(weights: Sequence[tuple[str, float]]) -> go.Figure:
    """Log-odds weight of each named feature (positive = riskier)."""
    figure = _figure("Feature weights (log-odds per unit)")
    ordered = sorted(weights, key=lambda item: item[1])
    figure.add_trace(go.Bar(x=[w for _, w in ordered], y=[n for n, _ in ordered], orientation="h",
                            marker={"color": ["#d62728" if w > 0 else "#2ca02c" for _, w in ordered]}))
    figure.update_layout(height=max(260, 40 + 22 * len(weights)))
    return figure


def task_timeline(events: Sequence[dict[str, Any]]) -> go.Figure:
    """A task's events over time, one row per attempt, coloured by kind."""
    figure = _figure("Timeline")
    kinds: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        kinds.setdefault(event["kind"], []).append(event)
    for kind, rows in kinds.items():
        figure.add_trace(go.Scatter(
            x=[r["ts"] for r in rows], y=[f"attempt {r['attempt']}" for r in rows], mode="markers", name=kind,
            marker={"size": 12, "symbol": "x" if kind == "attempt_failed" else "circle"},
            text=[(r.get("decision_reason") or r.get("error_message") or "")[:120] for r in rows],
        ))
    figure.update_yaxes(categoryorder="category descending")
    return figure


def policy_intervals(points: Sequence[dict[str, Any]], label: str) -> go.Figure:
    """One metric per policy: the point estimate with its 95 % interval as an error bar."""
    figure = _figure(f"{label}: estimate and 95 % CI per policy")
    figure.add_trace(go.Scatter(
        x=[p["value"] for p in points], y=[p["policy"] for p in points], mode="markers", name=label,
        error_x={"type": "data", "symmetric": False, "array": [p["hi"] - p["value"] for p in points],
                 "arrayminus": [p["value"] - p["lo"] for p in points]}))
    return figure


def precheck_drift(points: Sequence[dict[str, Any]]) -> go.Figure:
    """Per time bucket: mean predicted risk vs observed failure rate, ROC-AUC and Brier score."""
    figure = _figure("Risk model on real outcomes over time")
    x = [p["bucket"] for p in points]
    for name, key in (("mean predicted risk", "mean_risk"), ("observed failure rate", "observed"),
                      ("ROC-AUC", "precheck_auc"), ("Brier score", "precheck_brier")):
        figure.add_trace(go.Scatter(x=x, y=[p.get(key) for p in points], name=name, mode="lines+markers"))
    figure.update_yaxes(range=[0, 1])
    return figure
