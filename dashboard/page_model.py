"""Risk model: the version in force, its test metrics against the two baselines, calibration,
feature weights, and recent pre-check scores when the API reports them."""

from __future__ import annotations

from typing import Any

import streamlit as st

from . import charts
from .filters import project_picker
from .source import DataSource
from .widgets import pct, table, task_link, usd

_METRICS = ("roc_auc", "pr_auc", "brier")


def render(source: DataSource) -> None:
    st.title("Risk model")
    try:
        info = source.model_info()
    except Exception as exc:  # noqa: BLE001
        st.error(f"Could not read the risk model: {exc}")
        info = None
    if info is None:
        st.info("No risk model trained yet. Run `retrylens train` (from the store) or "
                "`retrylens train --traces FILE.jsonl`; the server picks up a new version without a restart.")
    else:
        _model(info.version, info.versions, info.meta, info.feature_weights)
    _prechecks(source)


def _model(version: str, versions: list[str], meta: dict[str, Any], weights: list[tuple[str, float]]) -> None:
    window = meta.get("training_window") or {}
    cols = st.columns(4)
    cols[0].metric("Version", version)
    # The day fits a quarter of 1280 px; with the time ("2026-12-01 18:40 UTC") it was cut.
    trained = str(meta.get("trained_at") or "")
    cols[1].metric("Trained", trained[:10] or "—", help=f"{trained[:10]} {trained[11:16]} UTC" if trained else None)
    cols[2].metric("Train / test tasks", f"{meta.get('n_train', '—')} / {meta.get('n_test', '—')}")
    cols[3].metric("Versions", len(versions))
    stamp = f"trained {trained[:10]} {trained[11:16]} UTC · " if trained else ""
    st.caption(f"{stamp}source {meta.get('source', '—')} · estimator {meta.get('estimator', '—')} · window "
               f"{window.get('start') or '—'} → {window.get('end') or '—'} · feature set {meta.get('feature_set', '—')}")
    evaluations = {"model": meta.get("metrics") or {}, **(meta.get("baselines") or {})}
    rows = [{"model": name, **{m: _num(ev.get(m)) for m in _METRICS}, "n": ev.get("n")}
            for name, ev in evaluations.items() if ev]
    if rows:
        st.subheader("Test metrics vs baselines")
        table(rows, key="model_metrics")
    tables = {name: ev.get("calibration") or [] for name, ev in evaluations.items() if ev and ev.get("calibration")}
    left, right = st.columns(2)
    if tables:
        left.plotly_chart(charts.calibration(tables), key="chart_calibration")
    else:
        left.info("No calibration table in this model's metadata.")
    if weights:
        right.plotly_chart(charts.feature_weights(weights), key="chart_weights")
    else:
        right.info("Feature weights appear once inputs with features are stored.")
    features = meta.get("features") or []
    if features:
        st.caption("Feature families: " + ", ".join(f"`{f}`" for f in features))


def _num(value: Any) -> float | None:
    return None if value is None else round(float(value), 4)


def _prechecks(source: DataSource) -> None:
    st.subheader("Pre-checks and how their tasks ended")
    project = project_picker(source, key="model_project", where=st)
    try:
        rows = source.recent_prechecks(project, limit=50)
        monitor = source.precheck_monitor(project)
    except Exception as exc:  # noqa: BLE001
        st.error(f"Could not read pre-checks: {exc}")
        return
    if rows is None:
        st.info("Pick a project to see its pre-checks.")
        return
    if not rows:
        st.info("No pre-checks recorded yet. Agents with a `Preflight` (or `POST /v1/precheck`) record one per task.")
        return
    over_time = (monitor or {}).get("over_time") or []
    judged = [r for r in over_time if r.get("judged")]
    if judged:
        st.plotly_chart(charts.precheck_drift(judged), key="chart_precheck_drift")
        st.caption("The risk model on real outcomes: mean predicted risk vs the observed failure rate (their gap is "
                   "the calibration drift an alert rule can watch, metric `calibration_gap`), ROC-AUC and Brier score "
                   "of the pre-checks whose tasks ended.")
    else:
        st.info("No pre-checked task has finished yet: calibration and AUC appear once outcomes are stored.")
    advice = (monitor or {}).get("advice") or []
    if advice:
        st.markdown("**Advice followed vs outcome**")
        table([{"advice": a["advice"].replace("_", " "), "followed": "yes" if a["followed"] else "no",
                "tasks": a["tasks"], "failure rate": pct(a["failure_rate"]), "hand-off rate": pct(a["handoff_rate"]),
                "mean risk": pct(a["mean_risk"]), "cost / task": usd(a["cost_per_task"])} for a in advice],
              key="advice_table")
    st.markdown("**Recent pre-checks**")
    table([_precheck_row(r) for r in rows], key="precheck_table")


def _precheck_row(r: dict[str, Any]) -> dict[str, Any]:
    top = (r.get("explanation") or {}).get("top_features") or []
    outcome = r.get("outcome") or "running or unknown"
    applied = r.get("applied")
    return {"time": str(r.get("ts", ""))[:19], "agent": r.get("agent"), "task": r.get("task_id") or "—",
            "risk": pct(r.get("risk")), "model": r.get("model_version"),
            "advice": ", ".join(a.replace("_", " ") for a in r.get("advice") or []) or "none",
            "applied": "—" if applied is None else ("yes" if applied else "no"), "outcome": outcome,
            "why": "; ".join(str(f.get("words") or f.get("feature")) for f in top[:3] if isinstance(f, dict)),
            "link": task_link(str(r.get("project")), str(r.get("task_id"))) if r.get("task_id") else ""}
