"""A policy report (or a live shadow comparison) as rows of words and numbers for the reports page.

Pure: report dict in, tables out, so a test can hold every cell to "no Python literal"
(an operator must never read ``{'value': 0.84, 'lo': ...}``). Reports of an unknown shape
fall back to key/value rows of scalars.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from retrylens.evaluation.verdict_words import VERDICT_WORDS, differing_agents, verdict_words

LABELS = {"success": "success rate", "attempts": "attempts / task", "tokens": "tokens / task",
          "cost_usd": "cost / task (USD)", "latency_ms": "latency / task (ms)", "handoff": "hand-off rate"}
DECISIONS = {"adopt_candidate": "adopt", "no_clear_winner": "no clear winner: keep the live policy",
             "insufficient_evidence": "insufficient evidence", "keep_live": "keep the live policy"}
VERDICTS = VERDICT_WORDS  # one source of the words: evaluation.verdict_words


def fmt(value: Any, metric: str = "") -> str:
    """A number in the metric's unit; ``—`` for missing or non-finite values."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return word(value)
    if metric in ("success", "handoff", "share"):
        return f"{value:.1%}"
    if metric == "cost_usd":
        return f"{value:.5f}"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.2f}"


def word(value: Any) -> str:
    """A policy field's value in words: lists joined, ``None`` as "none", no brackets or quotes."""
    if value is None:
        return "none"
    if isinstance(value, list | tuple):
        return ", ".join(word(v) for v in value) or "none"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {word(v)}" for k, v in value.items()) or "none"
    return str(value)


def changes_text(changes: list[Mapping[str, Any]] | None) -> str:
    if not changes:
        return "same as live"
    return "; ".join(f"{c.get('field')}: {word(c.get('live'))} → {word(c.get('candidate'))}" for c in changes)


def is_policy_report(data: Mapping[str, Any]) -> bool:
    return isinstance(data.get("recommendation"), Mapping) and "decision" in data["recommendation"]


def is_shadow_comparison(data: Mapping[str, Any]) -> bool:
    return "agreement" in data and "matrix" in data


def headline(data: Mapping[str, Any]) -> str:
    """The recommendation in one sentence, naming the candidate and what it changes."""
    rec = data["recommendation"]
    decision = str(rec.get("decision"))
    text = DECISIONS.get(decision, decision.replace("_", " "))
    if decision == "adopt_candidate":
        text = f"adopt {rec.get('policy')} ({changes_text(rec.get('changes'))})"
    reason = str(rec.get("reason") or "")
    if reason.startswith(text.split(":")[0]):
        return reason  # the reason already opens with the decision ("no clear winner: … keep the live policy")
    return f"{text}. {reason}".strip()


def margins_text(data: Mapping[str, Any]) -> str | None:
    m = data["recommendation"].get("margins")
    if not isinstance(m, Mapping):
        return None
    return (f"A candidate is adopted only when the 95 % CI's bound clears a practical margin: success "
            f"+{fmt(m.get('success'), 'share')}, or cost −{fmt(m.get('cost_share'), 'share')} with success no lower "
            f"than −{fmt(m.get('success_tolerance'), 'share')}.")


def candidate_rows(data: Mapping[str, Any]) -> list[dict[str, str]]:
    """Each candidate: what it changes against the live policy, its verdict and why; then, where an
    agent's own tasks give another verdict than the fleet's, a row per agent."""
    verdicts = {v.get("name"): v for v in data["recommendation"].get("candidates", []) if isinstance(v, Mapping)}
    rows = []
    for c in data.get("candidates") or []:
        v = verdicts.get(c.get("name"), {})
        rows.append({"candidate": str(c.get("name")), "changed fields (live → candidate)": changes_text(c.get("changes")),
                     "verdict": verdict_words(v), "why": str(v.get("why", ""))})
        rows += [{"candidate": f"{c.get('name')}, for {agent} alone (its own tasks and logged retries)",
                  "changed fields (live → candidate)": "as above", "verdict": verdict_words(av),
                  "why": str(av.get("why", ""))} for agent, av in differing_agents(v)]
    return rows


def estimate_rows(data: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per policy: each metric as ``value [lo, hi]`` and, for candidates, ``Δ value [lo, hi]``."""
    rows = []
    for p in data.get("policies") or []:
        row = {"policy": str(p.get("name"))}
        for m in data.get("metrics") or []:
            e = (p.get("estimates") or {}).get(m) or {}
            row[LABELS.get(m, m)] = f"{fmt(e.get('value'), m)} [{fmt(e.get('lo'), m)}, {fmt(e.get('hi'), m)}]"
            if p.get("name") != "live":
                d = (p.get("diff_vs_live") or {}).get(m) or {}
                row[f"Δ {LABELS.get(m, m)}"] = (f"{_signed(d.get('value'), m)} [{_signed(d.get('lo'), m)}, "
                                                f"{_signed(d.get('hi'), m)}]")
            else:  # every row has every column: a missing cell renders as "None" on some pandas
                row[f"Δ {LABELS.get(m, m)}"] = "—"
        row["stopped earlier"] = fmt(p.get("truncated_share"), "share")
        row["imputed"] = fmt(p.get("imputed_share"), "share")
        row["not supported by the log"] = fmt(p.get("unsupported_share"), "share")
        rows.append(row)
    return rows


def support_rows(data: Mapping[str, Any]) -> list[dict[str, str]]:
    """Candidates with tasks the log cannot support: their share, the success bounds, and where the gaps are."""
    rows = []
    for p in data.get("policies") or []:
        if not p.get("unsupported_share"):
            continue
        b = (p.get("bounds") or {}).get("success") or {}
        gaps = "; ".join(f"{word(g.get('error_type'))} of {word(g.get('agent'))} after "
                         f"{word(g.get('failures_of_class'))} such failure(s): {word(g.get('tasks'))} tasks, "
                         f"{word(g.get('logged_retries'))} logged retries" for g in p.get("support_gaps") or [])
        rows.append({"candidate": str(p.get("name")), "tasks not supported": fmt(p.get("unsupported_share"), "share"),
                     "success difference (all fail … first succeeds)":
                         f"{_signed(b.get('point_lo'), 'success')} … {_signed(b.get('point_hi'), 'success')}",
                     "95 % bounds": f"{_signed(b.get('lo'), 'success')} … {_signed(b.get('hi'), 'success')}",
                     "retries the log never shows": gaps})
    return rows


def baseline_warnings(data: Mapping[str, Any]) -> list[str]:
    """What the reader must know about the live policy the report compared against."""
    baseline = data.get("baseline")
    if not isinstance(baseline, Mapping):
        return []
    return [str(w) for w in baseline.get("warnings") or []]


def _signed(value: Any, metric: str) -> str:
    text = fmt(value, metric)
    return text if text.startswith("-") or text == "—" else f"+{text}"


def interval_points(data: Mapping[str, Any], metric: str) -> list[dict[str, Any]]:
    """``(policy, value, lo, hi)`` of one metric, for a point-and-interval chart."""
    points = []
    for p in data.get("policies") or []:
        e = (p.get("estimates") or {}).get(metric) or {}
        if all(isinstance(e.get(k), int | float) for k in ("value", "lo", "hi")):
            points.append({"policy": str(p.get("name")), "value": e["value"], "lo": e["lo"], "hi": e["hi"]})
    return points


def off_policy_rows(data: Mapping[str, Any]) -> list[dict[str, str]]:
    rows = []
    for r in data.get("off_policy") or []:
        for estimator, values in (r.get("estimates") or {}).items():
            row = {"target": str(r.get("name")), "estimator": str(estimator).upper()}
            for m in data.get("metrics") or []:
                e = values.get(m) or {}
                row[LABELS.get(m, m)] = f"{fmt(e.get('value'), m)} ± {fmt(e.get('se'), m)}"
            row["effective n"] = fmt(r.get("effective_n"))
            row["unsupported"] = fmt(r.get("unsupported_share"), "share")
            rows.append(row)
    return rows


def shadow_rows(shadow: Mapping[str, Any] | None) -> tuple[str, list[dict[str, str]]]:
    """A sentence and the live-vs-candidate matrix of a shadow comparison."""
    if not shadow or not shadow.get("decisions"):
        return "No shadow decisions in the history.", []
    matrix = [{"live decision": str(r.get("live")), "shadow candidate's decision": str(r.get("candidate")),
               "decisions": fmt(r.get("n"))} for r in shadow.get("matrix") or []]
    return (f"{fmt(shadow.get('decisions'))} decisions; the shadow candidate agreed with the live policy on "
            f"{fmt(shadow.get('agreement'), 'share')} of them.", matrix)


def history_rows(data: Mapping[str, Any]) -> list[dict[str, str]]:
    history = data.get("history") or {}
    return [{"history": str(k).replace("_", " "), "value": word(v) if not isinstance(v, int | float) else fmt(v)}
            for k, v in history.items()]


def scalar_rows(data: Mapping[str, Any]) -> list[dict[str, str]]:
    """Any other report: its scalar fields as rows (nested values are summarised, not dumped)."""
    rows = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            value = f"{len(value)} fields"
        elif isinstance(value, list):
            value = f"{len(value)} entries"
        rows.append({"field": str(key).replace("_", " "), "value": fmt(value)})
    return rows
