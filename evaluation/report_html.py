"""The policy report as one HTML file that opens offline: inline CSS, inline SVG plots, no scripts."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from .verdict_words import VERDICT_WORDS, differing_agents, verdict_words

LABELS = {"success": "success rate", "attempts": "attempts / task", "tokens": "tokens / task",
          "cost_usd": "cost / task (USD)", "latency_ms": "latency / task (ms)", "handoff": "hand-off rate"}
COLOURS = ["#555", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]

CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}table{border-collapse:collapse;margin:.6em 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f4f4f4}td:first-child{text-align:left}
.rec{padding:.8em 1em;border-left:5px solid #2ca02c;background:#f3faf3}.warn{border-color:#d62728;background:#fdf3f3}
.plots{display:flex;flex-wrap:wrap;gap:12px}.muted{color:#777}"""


def _fmt(value: Any, metric: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if metric in ("success", "handoff"):
        return f"{value:.1%}"
    if metric == "cost_usd":
        return f"{value:.5f}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return escape(str(value))


def _ci_plot(metric: str, policies: list[dict[str, Any]]) -> str:
    """Horizontal point + 95 % CI per policy, as inline SVG."""
    rows = [(p["name"], p["estimates"][metric]) for p in policies]
    lo = min(e["lo"] for _, e in rows)
    hi = max(e["hi"] for _, e in rows)
    span = (hi - lo) or abs(hi) or 1.0
    lo, hi = lo - 0.08 * span, hi + 0.08 * span
    width, left, row_h = 340, 110, 26
    height = 30 + row_h * len(rows)

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (width - left - 15)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(LABELS[metric])}"><text x="4" y="14" font-weight="bold">'
             f'{escape(LABELS[metric])}</text>']
    for i, (name, e) in enumerate(rows):
        y = 32 + i * row_h
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<text x="4" y="{y + 4}" font-size="12">{escape(name[:14])}</text>'
                     f'<line x1="{x(e["lo"]):.1f}" x2="{x(e["hi"]):.1f}" y1="{y}" y2="{y}" stroke="{colour}" '
                     f'stroke-width="2"/><circle cx="{x(e["value"]):.1f}" cy="{y}" r="4" fill="{colour}">'
                     f'<title>{escape(name)}: {_fmt(e["value"], metric)} [{_fmt(e["lo"], metric)}, '
                     f'{_fmt(e["hi"], metric)}]</title></circle>')
    parts.append(f'<text x="{left}" y="{height - 2}" font-size="10" fill="#777">{_fmt(lo, metric)}</text>'
                 f'<text x="{width - 60}" y="{height - 2}" font-size="10" fill="#777">{_fmt(hi, metric)}</text></svg>')
    return "".join(parts)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _policies_section(report: dict[str, Any]) -> str:
    policies = report["policies"]
    metrics = report["metrics"]
    plots = "".join(_ci_plot(m, policies) for m in metrics)
    rows = []
    for p in policies:
        cells = [escape(p["name"])]
        for m in metrics:
            e, d = p["estimates"][m], p["diff_vs_live"][m]
            delta = "" if p["name"] == "live" else (
                f'<br><span class="muted">Δ {_fmt(d["value"], m)} [{_fmt(d["lo"], m)}, {_fmt(d["hi"], m)}]</span>')
            cells.append(f'{_fmt(e["value"], m)} <span class="muted">[{_fmt(e["lo"], m)}, {_fmt(e["hi"], m)}]'
                         f'</span>{delta}')
        b = (p.get("bounds") or {}).get("success")
        unsupported = p.get("unsupported_share") or 0.0
        support = (f'{unsupported:.1%}<br><span class="muted">success Δ between {_fmt(b["point_lo"], "success")} and '
                   f'{_fmt(b["point_hi"], "success")}</span>' if unsupported and b else f"{unsupported:.1%}")
        cells += [f'{p["truncated_share"]:.1%}', f'{p["imputed_share"]:.1%}', support,
                  f'{p["decision_divergence"]:.1%}']
        rows.append(cells)
    table = _table(["policy", *[LABELS[m] for m in metrics], "stopped earlier", "imputed",
                    "not supported by the log", "decision divergence"], rows)
    return (f'<h2>Counterfactual replay</h2><div class="plots">{plots}</div>{table}'
            '<p class="muted">Point estimate, [95 % bootstrap CI]; Δ: difference to the live policy with its '
            'paired CI.</p>')


def _off_policy_section(report: dict[str, Any]) -> str:
    rows = []
    for r in report["off_policy"]:
        for est, values in r["estimates"].items():
            cells = [f'{escape(r["name"])} · {est.upper()}']
            for m in report["metrics"]:
                e = values[m]
                cells.append(f'{_fmt(e["value"], m)} <span class="muted">± {_fmt(e["se"], m)}</span>')
            cells += [f'{r["effective_n"]:.0f}', f'{r["unsupported_share"]:.1%}']
            rows.append(cells)
    table = _table(["target · estimator", *[LABELS[m] for m in report["metrics"]], "effective n", "unsupported"],
                   rows)
    return ("<h2>Off-policy estimates (logged propensities)</h2>" + table +
            '<p class="muted">Value ± standard error. "unsupported": tasks where the target goes on where the log '
            "stopped; IPS/SNIPS are biased there, DR fills them with its model.</p>")


def _shadow_section(shadow: dict[str, Any] | None) -> str:
    if not shadow or not shadow.get("decisions"):
        return "<h2>Shadow comparison</h2><p>No shadow decisions in the history.</p>"
    matrix = _table(["live", "candidate", "decisions"],
                    [[escape(r["live"]), escape(r["candidate"]), str(r["n"])] for r in shadow["matrix"]])
    slices = "".join(
        f"<h3>by {escape(name)}</h3>" + _table([name, "decisions", "agree", "agreement"],
                                               [[escape(str(r["value"])), str(r["n"]), str(r["agree"]),
                                                 _fmt(r["agreement"], "success")] for r in rows])
        for name, rows in shadow["slices"].items())
    differ = _table(["live", "candidate", "live outcome", "decisions"],
                    [[escape(r["live"]), escape(r["candidate"]), escape(r["live_outcome"]), str(r["n"])]
                     for r in shadow["disagreements"]])
    return (f"<h2>Shadow comparison</h2><p>{shadow['decisions']} decisions, agreement "
            f"{_fmt(shadow['agreement'], 'success')}.</p>{matrix}<h3>Where they differ, and how the task ended "
            f"under the live policy</h3>{differ}{slices}")


VERDICTS = VERDICT_WORDS  # one source of the words: verdict_words


def _changes_cell(changes: list[dict[str, Any]]) -> str:
    if not changes:
        return '<span class="muted">same as live</span>'
    return "<br>".join(f"{escape(str(c['field']))}: {escape(_word(c['live']))} → <b>{escape(_word(c['candidate']))}</b>"
                       for c in changes)


def _word(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def _recommendation(report: dict[str, Any]) -> str:
    rec = report["recommendation"]
    warn = rec["decision"] != "adopt_candidate"
    title = {"adopt_candidate": f"adopt {rec.get('policy')}", "no_clear_winner": "no clear winner: keep the live policy",
             "insufficient_evidence": "insufficient evidence"}.get(rec["decision"], str(rec["decision"]))
    margins = rec.get("margins")
    margin_text = (f"<br><span class='muted'>Adopted only when the 95 % CI's bound clears a practical margin: success "
                   f"+{margins['success']:.1%}, or cost −{margins['cost_share']:.0%} with success no lower than "
                   f"−{margins['success_tolerance']:.1%}.</span>" if margins else "")
    changes = (f"<br>What it changes against the live policy:<br>{_changes_cell(rec['changes'])}"
               if rec.get("changes") else "")
    warnings = "".join(f"<br><b>Warning:</b> {escape(str(w))}"
                       for w in (report.get("baseline") or {}).get("warnings", []))
    return (f"<div class='rec{' warn' if warn else ''}'><b>Recommendation: {escape(title)}</b><br>"
            f"{escape(rec['reason'])}{changes}{margin_text}{warnings}</div>")


def _candidates_section(report: dict[str, Any]) -> str:
    verdicts = {v["name"]: v for v in report["recommendation"].get("candidates", [])}
    rows = []
    for c in report.get("candidates", []):
        v = verdicts.get(c["name"], {})
        rows.append([escape(c["name"]), escape(str(c.get("source", ""))), _changes_cell(c.get("changes", [])),
                     escape(verdict_words(v)), escape(str(v.get("why", "")))])
        rows += [[f"&nbsp;&nbsp;for {escape(agent)} alone", '<span class="muted">its own tasks and logged retries</span>',
                  '<span class="muted">as above</span>', escape(verdict_words(av)), escape(str(av.get("why", "")))]
                 for agent, av in differing_agents(v)]
    if not rows:
        return ""
    return ("<h2>Candidates and what they change</h2>" +
            _table(["candidate", "source", "changed fields (live → candidate)", "verdict", "why"], rows))


def render_html(report: dict[str, Any]) -> str:
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>RetryLens policy report</title>",
        f"<style>{CSS}</style></head><body><h1>Retry policy report</h1>",
        f"<p class='muted'>Generated {escape(report['generated_at'])} · live policy "
        f"{escape(report['live']['policy_id'])}@{escape(report['live']['policy_version'])} · "
        f"{report['history']['tasks']} tasks, {report['history']['attempts']} attempts</p>",
        _recommendation(report),
        _candidates_section(report),
    ]
    if report["evidence"] == "insufficient":
        parts.append(f"<h2>Insufficient evidence</h2><p>{escape(report['evidence_reason'])}. No estimates are "
                     "shown: with so little history they would look more certain than they are.</p>")
    else:
        parts += [_policies_section(report), _off_policy_section(report)]
    parts.append(_shadow_section(report.get("shadow")))
    parts.append("<h2>What replay can and cannot know</h2><ul>" +
                 "".join(f"<li>{escape(x)}</li>" for x in report["limitations"]) + "</ul></body></html>")
    return "".join(parts)
