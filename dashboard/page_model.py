"""Risk model: the version in force, its test metrics against the two baselines, calibration,
feature weights (in words too), and recent pre-check scores when the API reports them, any
one of them explained: its reasons, the nearest past failures of similar inputs (with
links to their tasks and failure groups) and the evidence behind each advice."""

from __future__ import annotations

import math
from typing import Any

import streamlit as st

from retrylens.analytics.explain import describe

from . import charts
from .filters import project_picker
from .source import DataSource
from .text import plain
from .widgets import pct, table, task_link, usd

_METRICS = ("roc_auc", "pr_auc", "brier")


def render(source: DataSource) -> None:
    st.title("Risk model")
    try:
        info = source.model_info()
    except Exception as exc:  # noqa: BLE001
        st.error(f"Could not read the risk model: {plain(exc)}")
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
    cols[1].metric("Trained", trained[:10] or "—", help=plain(f"{trained[:10]} {trained[11:16]} UTC") if trained else None)
    cols[2].metric("Train / test tasks", f"{meta.get('n_train', '—')} / {meta.get('n_test', '—')}")
    cols[3].metric("Versions", len(versions))
    stamp = f"trained {trained[:10]} {trained[11:16]} UTC · " if trained else ""
    st.caption(plain(f"{stamp}source {meta.get('source', '—')} · estimator {meta.get('estimator', '—')} · window "
                     f"{window.get('start') or '—'} → {window.get('end') or '—'} · feature set "
                     f"{meta.get('feature_set', '—')}"))
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
        st.markdown("**The strongest features, in words** (the effect of one unit of each, other things equal)")
        table([_weight_row(name, weight) for name, weight in weights[:10]], key="weights_in_words")
    else:
        right.info("Feature weights appear once inputs with features are stored.")
    features = meta.get("features") or []
    if features:
        st.caption("Feature families: " + plain(", ".join(str(f) for f in features)))


def _odds(log_odds: float) -> str:
    factor = math.exp(max(-50.0, min(50.0, log_odds)))
    return f"×{factor:.2g}" if factor >= 1 else f"÷{1 / factor:.2g}"


def _weight_row(name: str, weight: float) -> dict[str, Any]:
    return {"feature": name, "in words": describe(name, 1.0),
            "effect": "raises failure odds" if weight > 0 else "lowers failure odds",
            "failure odds per unit": _odds(weight)}


def _num(value: Any) -> float | None:
    return None if value is None else round(float(value), 4)


def _prechecks(source: DataSource) -> None:
    st.subheader("Pre-checks and how their tasks ended")
    project = project_picker(source, key="model_project", where=st)
    try:
        rows = source.recent_prechecks(project, limit=50)
        monitor = source.precheck_monitor(project)
    except Exception as exc:  # noqa: BLE001
        st.error(f"Could not read pre-checks: {plain(exc)}")
        return
    if rows is None:
        st.info("Pick a project to see its pre-checks.")
        return
    if not rows:
        st.info("No pre-checks recorded yet. Agents with a `Preflight` (or `POST /v1/precheck`) record one per task.")
        return
    over_time = (monitor or {}).get("over_time") or []
    judged = [r for r in over_time if r.get("judged")]
    if monitor is None:  # over the API, calibration and advice vs outcome are read per project
        st.info("Pick one project to see how its pre-checked tasks ended: calibration, AUC and advice "
                "followed vs outcome are measured per project.")
    elif judged:
        drift = drift_warning(judged)
        if drift:
            st.warning(drift)
        st.plotly_chart(charts.precheck_drift(judged), key="chart_precheck_drift")
        hours = judged[0].get("bucket_hours") or 24
        st.caption("The risk model on real outcomes: mean predicted risk vs the observed failure rate (their gap is "
                   "the calibration drift an alert rule can watch, metric `calibration_gap`), ROC-AUC and Brier score "
                   f"of the pre-checks whose tasks ended, per {hours} h by when each task started "
                   f"({sum(r['judged'] for r in judged):,} judged; hover a point for how many are behind it).")
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
    _explained(rows)


#: ``calibration_error`` above which the page warns of drift, on a bucket of at least DRIFT_MIN_JUDGED outcomes.
DRIFT_CALIBRATION_ERROR = 0.1
DRIFT_MIN_JUDGED = 50


def drift_warning(judged: list[dict[str, Any]]) -> str:
    """Words when the latest bucket with enough outcomes is miscalibrated by risk segment (on by default:
    a swap of which inputs are risky keeps the mean risk equal to the observed rate, so only the
    per-segment error shows it), else ''."""
    latest = next((p for p in reversed(judged) if (p.get("judged") or 0) >= DRIFT_MIN_JUDGED), None)
    error = (latest or {}).get("calibration_error")
    if error is None or error <= DRIFT_CALIBRATION_ERROR:
        return ""
    return (f"Risk model drift: in the {latest.get('bucket')} bucket the risk is off by {error:.2f} on average within "
            f"risk segments ({latest.get('judged')} tasks judged; above {DRIFT_CALIBRATION_ERROR}): which inputs are "
            "risky may have changed. Retrain on recent tasks (`retrylens train --days 7`).")


def _label(rows: list[dict[str, Any]], i: int) -> str:
    r = rows[i]
    return f"{str(r.get('ts', ''))[:19]} · {r.get('agent')} · task {r.get('task_id') or '—'} · risk {pct(r.get('risk'))}"


def _explained(rows: list[dict[str, Any]]) -> None:
    """One pre-check's answer as the agent got it: reasons, nearest past failures, advice evidence."""
    st.subheader("Why: one pre-check explained")
    chosen = st.selectbox("Pre-check", list(range(len(rows))), format_func=lambda i: _label(rows, i),
                          key="explain_precheck")
    explanation = rows[chosen or 0].get("explanation") or {}
    reasons = [f for f in explanation.get("top_features") or [] if isinstance(f, dict)]
    if reasons:
        table([{"reason": f.get("words") or f.get("feature"),
                "effect": "raises the risk" if float(f.get("contribution") or 0) > 0 else "lowers the risk",
                "failure odds": _odds(float(f.get("contribution") or 0))} for f in reasons], key="explain_reasons")
    else:
        st.info("This answer has no feature reasons (no model was in force).")
    history = explanation.get("input_history") or {}
    if history.get("words"):
        st.caption(f"This input's own history: {plain(history['words'])}")
    similar = [n for n in explanation.get("similar_failures") or [] if isinstance(n, dict)]
    st.markdown("**Nearest past failures of similar inputs**")
    if similar:
        table([{"task": n.get("task_id"), "agent": n.get("agent"), "alike": pct(n.get("similarity")),
                "shared words": ", ".join(n.get("shared_words") or []),
                "ended": str(n.get("outcome") or "").replace("_", " "), "error": n.get("error_type") or "—",
                "failure group": n.get("failure_group") or "—", "known bad": "yes" if n.get("known_bad") else "no",
                "task link": n.get("link") or "", "group link": n.get("group_link") or ""} for n in similar],
              key="explain_similar")
    else:
        st.info("No failed task with a similar input (two shared keywords or more) in this project's recent history.")
    advice = [a for a in explanation.get("advice") or [] if isinstance(a, dict)]
    st.markdown("**Advice and the evidence behind it**")
    if advice:
        table([{"advice": str(a.get("advice") or "").replace("_", " "), "action": a.get("action") or "",
                "evidence": a.get("evidence") or ""} for a in advice], key="explain_advice")
    else:
        st.info("No advice was given: the history shows no action that helps inputs like this one.")


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
