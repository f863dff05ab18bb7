"""The policy report: live vs candidates, with evidence, as JSON and one offline HTML file.

:func:`build_report` runs replay (with paired bootstrap CIs), the off-policy estimators
and, when a store is given, the shadow comparison, and decides a recommendation by
explicit rules (:func:`recommend`). A history too small to say anything gets
``"evidence": "insufficient"`` and no numbers, rather than confident ones.
:mod:`report_html` renders the same dict as HTML.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from retrylens.sdk.core.policy import RetryPolicy

from .baseline import Baseline
from .candidates import Candidate, describe_changes, policy_changes
from .history import History, describe
from .off_policy import evaluate
from .replay import METRICS, PolicyReplay, replay
from .shadow import ShadowComparison
from .verdict_words import (
    VERDICT_WORDS as VERDICT_WORDS,  # re-exported: readers import it from here
)
from .verdict_words import differing_agents, verdict_text

MIN_TASKS = 30          # fewer finished tasks: no numbers, "insufficient evidence"
MIN_FAILURES = 10       # fewer failures: retry policies cannot differ measurably
MAX_IMPUTED_SHARE = 0.3  # more imputed tasks than this: the estimate leans on the model
SUCCESS_TOLERANCE = 0.01  # a candidate may lose at most this much success (CI lower bound)

LIMITATIONS = [
    "Replay cannot know the outcome of an attempt that was never tried. Where the live policy "
    "stopped and a candidate would have gone on, the extra attempts are imputed only from logged "
    "retries of the same situation: the same agent and failure class, at least as many failures of "
    "that class already in the task, and at least as late an attempt (tasks that got that far are the "
    "hard ones); the chance of a retry is assumed not to change over the further attempts. With fewer "
    "than 10 such logged retries the situation is not supported: no rate is borrowed from another class "
    "or from the whole log; those tasks count as failing every extra attempt, the report gives the bounds "
    "(all fail … the first succeeds), and where the bounds could change the verdict it is 'not supported "
    "by the log', with the exploration that would produce the evidence.",
    "Stopping earlier is observed, not imputed: a task that reached attempt k also shows what "
    "stopping at any j < k gives (implicit feedback), so lower caps and budgets need no exploration.",
    "A different decision kind (e.g. an earlier degrade threshold) keeps the logged continuation; "
    "'decision_divergence' is the share of retried failures where that assumption is used. The "
    "off-policy estimators (logged propensities) cover decision kinds without that assumption.",
    "Role overrides and fleet-level protection (retry throttle, circuit breaker) are taken as logged.",
    "Events do not carry a task's completed steps: a task retry allowance that grows per step is "
    "credited with the steps a budget stop names ('... after N steps'), and with none at other "
    "failures, where a candidate's allowance is read as its base.",
    "Confidence intervals are 95 % paired Poisson-bootstrap percentile intervals over tasks: they "
    "describe the mean per task of traffic like the logged one.",
]


def _evidence(h: History) -> tuple[str, str]:
    if h.n_tasks < MIN_TASKS:
        return "insufficient", f"only {h.n_tasks} finished tasks in the history (at least {MIN_TASKS} needed)"
    failures = int(h.failed.sum())
    if failures < MIN_FAILURES:
        return "insufficient", f"only {failures} failed attempts in the history (at least {MIN_FAILURES} needed)"
    return "sufficient", f"{h.n_tasks} finished tasks, {failures} failed attempts"


def policy_entry(r: PolicyReplay, policy: RetryPolicy, source: str) -> dict[str, Any]:
    """One policy's estimates, differences to live and how much of them the log supports."""
    return {
        "name": r.name, "policy_id": policy.id, "policy_version": policy.version, "source": source,
        "estimates": {m: e.as_dict() for m, e in r.estimates.items()},
        "diff_vs_live": {m: e.as_dict() for m, e in r.diff_vs_live.items()},
        "diff_if_unsupported_succeed": {m: e.as_dict() for m, e in r.diff_optimistic.items()},
        "bounds": {m: b.as_dict() for m, b in r.bounds.items()},
        "truncated_share": float(r.truncated.mean()), "imputed_share": float(r.extended.mean()),
        "unsupported_share": float(r.unsupported.mean()) if len(r.unsupported) else 0.0,
        "support_gaps": r.gaps, "decision_divergence": r.decision_divergence, "tasks": int(len(r.truncated)),
        "by_agent": {agent: {
            "estimates": {m: e.as_dict() for m, e in j.estimates.items()},
            "diff_vs_live": {m: e.as_dict() for m, e in j.diff_vs_live.items()},
            "diff_if_unsupported_succeed": {m: e.as_dict() for m, e in j.diff_optimistic.items()},
            "bounds": {m: b.as_dict() for m, b in j.bounds.items()},
            "imputed_share": j.imputed_share, "unsupported_share": j.unsupported_share,
            "support_gaps": [g for g in r.gaps if g["agent"] == agent], "tasks": j.tasks,
        } for agent, j in r.by_agent.items()},
    }


@dataclass(frozen=True, kw_only=True)
class Margins:
    """The smallest improvements worth a policy change: a candidate is adopted only when the
    95 % CI's bound, not the point estimate, clears them.

    Why these defaults: ``success`` 1 percentage point is 10 more successful tasks per
    1,000, roughly the smallest gain that outweighs the cost of reviewing and rolling out a
    policy change; ``cost_share`` 5 % of the live cost per task is the same idea for money.
    An interval that merely excludes zero (+0.0 % … +0.3 %) is "significant" and still not
    worth acting on. Override them with ``--min-success-gain`` / ``--min-cost-saving``
    (CLI) or ``build_report(margins=...)``.
    """

    success: float = 0.01
    cost_share: float = 0.05
    success_tolerance: float = SUCCESS_TOLERANCE

    def __post_init__(self) -> None:
        for name in ("success", "cost_share", "success_tolerance"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and 0 <= value < 1):
                raise ValueError(f"margin {name} must be a number in [0, 1), got {value!r}")


def pct(value: float) -> str:
    """A signed percentage; one more decimal where one would print a non-zero value as ``+0.0%``
    (below 0.005 % it prints ``+0.00%``: less than one task in 10,000)."""
    digits = 1
    while digits < 2 and value and round(abs(value) * 100, digits) == 0:
        digits += 1
    return f"{value:+.{digits}%}"


def _supported_verdict(p: dict[str, Any], live_cost: float, margins: Margins) -> tuple[str, str, float]:
    """``(verdict, why, score)`` of one candidate against the live policy.

    Judged first where the unsupported retries all fail, then where the first of them
    succeeds: when the two verdicts differ, the log cannot tell which is right, and the
    verdict is ``not_supported`` with what would produce the evidence.
    """
    verdict = _verdict(p["diff_vs_live"], p["imputed_share"], live_cost, margins)
    share = float(p.get("unsupported_share") or 0.0)
    if share > 0 and p.get("diff_if_unsupported_succeed"):
        hopeful = _verdict(p["diff_if_unsupported_succeed"], p["imputed_share"], live_cost, margins)
        if hopeful[0] != verdict[0]:
            return "not_supported", _unsupported_why(p, share), 0.0
        if verdict[0] in ("better", "cheaper", "worse"):
            return verdict[0], verdict[1] + (f"; holds whatever the {share:.0%} of tasks that need retries the log "
                                             "never shows would do"), verdict[2]
    return verdict


def _unsupported_why(p: dict[str, Any], share: float) -> str:
    b = p["bounds"]["success"]
    gaps = p.get("support_gaps") or []
    where = "; ".join(f"{g['error_type']} of {g['agent']} after {g['failures_of_class']} such failure(s): "
                      f"{g['tasks']} task(s), {g['logged_retries']} logged retries" for g in gaps[:3])
    return (f"not supported by the log: {share:.0%} of its tasks need retries the live policy never made "
            f"({where}); its success difference lies between {pct(b['point_lo'])} (they all fail) and "
            f"{pct(b['point_hi'])} (the first succeeds), 95 % bounds {pct(b['lo'])} … {pct(b['hi'])}. "
            + exploration_advice(p))


#: The stop-exploration rate the report suggests (``shadow.explore_stops``).
SUGGESTED_EXPLORATION = 0.2


def exploration_advice(p: dict[str, Any], tasks: int | None = None) -> str:
    """What would produce the evidence: stop exploration of the change at a stated rate for a
    stated number of tasks, or a canary."""
    from .replay import MIN_SUPPORT_TRIALS

    gaps = p.get("support_gaps") or []
    reach = max((int(g["tasks"]) for g in gaps), default=0)
    need = max((MIN_SUPPORT_TRIALS - int(g["logged_retries"]) for g in gaps), default=MIN_SUPPORT_TRIALS)
    n = tasks or int(p.get("tasks") or 0)
    if reach <= 0 or n <= 0:
        return ("To get the evidence, run it as the shadow candidate with shadow.explore_stops "
                f"{SUGGESTED_EXPLORATION:g}, or as a canary.")
    share = reach / n
    explore = math.ceil(need / (SUGGESTED_EXPLORATION * share))
    canary = math.ceil(need / share)
    return (f"To get the evidence: run it as the shadow candidate with shadow.explore_stops "
            f"{SUGGESTED_EXPLORATION:g} for about {explore:,} tasks of traffic like this history (its "
            f"{reach} of {n} tasks reached that point), or as a canary on about {canary:,} tasks; then report again.")


def _verdict(d: dict[str, dict[str, float]], imputed_share: float, live_cost: float,
             margins: Margins) -> tuple[str, str, float]:
    success, cost = d["success"], d["cost_usd"]
    ci = f"95 % CI {pct(success['lo'])} … {pct(success['hi'])}"
    cost_ci = f"95 % CI {cost['lo']:+.5f} … {cost['hi']:+.5f}"
    if imputed_share > MAX_IMPUTED_SHARE:
        return ("leans_on_imputation", f"{imputed_share:.0%} of its tasks are imputed "
                f"(more than {MAX_IMPUTED_SHARE:.0%})", 0.0)
    if success["lo"] >= margins.success:
        return ("better", f"success rate {pct(success['value'])} ({ci}) clears the {margins.success:.1%} margin, "
                f"at cost per task {cost['value']:+.5f} USD", 1.0 + success["lo"])
    saving = margins.cost_share * abs(live_cost)
    if success["lo"] > -margins.success_tolerance and cost["hi"] <= -saving and cost["hi"] < 0:
        return ("cheaper", f"cost per task {cost['value']:+.5f} USD ({cost_ci}) saves at least "
                f"{margins.cost_share:.0%} of the live cost with no measurable loss of success ({ci})",
                -cost["hi"] / max(abs(live_cost), 1e-12))
    if success["lo"] > 0:
        return ("below_margin", f"success rate {pct(success['value'])} ({ci}): above zero, but the CI's lower "
                f"bound is below the {margins.success:.1%} margin", 0.0)
    if success["hi"] < 0:
        return ("worse", f"success rate {pct(success['value'])} ({ci})", 0.0)
    return ("within_uncertainty", f"success rate {pct(success['value'])} ({ci}) and cost per task "
            f"{cost['value']:+.5f} USD ({cost_ci}): no difference beyond the uncertainty", 0.0)


def recommend(policies: list[dict[str, Any]], margins: Margins | None = None) -> dict[str, Any]:
    """Adopt a candidate only when its CI's bound clears a practical margin; else "no clear winner".

    ``policies[0]`` is the live policy; every candidate gets a verdict with its changed
    fields (``changes``), so the report says what each one is and why it was (not) chosen.
    """
    margins = margins or Margins()
    live_cost = float(policies[0]["estimates"]["cost_usd"]["value"]) if policies else 0.0
    verdicts = []
    best: tuple[float, dict[str, Any], str] | None = None
    live_by_agent = policies[0].get("by_agent") or {} if policies else {}
    for p in policies[1:]:
        verdict, why, score = _supported_verdict(p, live_cost, margins)
        entry = {"name": p["name"], "verdict": verdict, "why": why, "changes": p.get("changes", [])}
        if p.get("by_agent"):
            entry["by_agent"] = {}
            for agent, sub in p["by_agent"].items():
                agent_cost = float(live_by_agent.get(agent, {}).get("estimates", {}).get("cost_usd", {})
                                   .get("value", live_cost))
                v, w, _ = _supported_verdict(sub, agent_cost, margins)
                entry["by_agent"][agent] = {"verdict": v, "why": w}
        verdicts.append(entry)
        if verdict in ("better", "cheaper") and (best is None or score > best[0]):
            best = (score, p, why)
    margin_words = {"success": margins.success, "cost_share": margins.cost_share,
                    "success_tolerance": margins.success_tolerance}
    if best is None:
        unsupported = [v["name"] for v in verdicts if v["verdict"] == "not_supported"]
        tail = (f"; not supported by the log: {', '.join(unsupported)} (see its verdict for the exploration "
                "that would tell)" if unsupported else "")
        return {"decision": "no_clear_winner", "policy": None, "margins": margin_words, "candidates": verdicts,
                "reason": "no clear winner: no candidate beats the live policy by more than the practical margin "
                          f"(success +{margins.success:.1%} or cost -{margins.cost_share:.0%}, judged on the 95 % "
                          "CI's bound); keep the live policy" + tail}
    _, p, why = best
    return {"decision": "adopt_candidate", "policy": p["name"], "reason": why, "changes": p.get("changes", []),
            "margins": margin_words, "candidates": verdicts,
            "evidence": {"imputed_share": p["imputed_share"], "truncated_share": p["truncated_share"],
                         "decision_divergence": p["decision_divergence"]}}


def build_report(h: History, live: RetryPolicy, candidates: list[Candidate], *,
                 shadow: ShadowComparison | None = None, replicates: int = 400, seed: int = 0,
                 progress: Callable[[str], None] | None = None, margins: Margins | None = None,
                 baseline: Baseline | None = None) -> dict[str, Any]:
    """The report dict; ``baseline`` says where ``live`` came from (and what to beware of)."""
    step = progress or (lambda _msg: None)
    evidence, why = _evidence(h)
    report: dict[str, Any] = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "history": dict(describe(h)), "evidence": evidence, "evidence_reason": why,
        "metrics": list(METRICS), "limitations": LIMITATIONS,
        "live": {"policy_id": live.id, "policy_version": live.version},
        "baseline": (baseline.as_dict() if baseline is not None
                     else {"policy": f"{live.id}@{live.version}", "source": "given",
                           "history_policies": list(h.policies), "warnings": []}),
        "candidates": [{"name": c.name, "source": c.source, "policy_version": c.policy.version,
                        "changes": policy_changes(live, c.policy)} for c in candidates],
        "shadow": shadow.as_dict() if shadow is not None else None,
    }
    if evidence == "insufficient":
        step("insufficient evidence: no estimates")
        report["policies"] = []
        report["off_policy"] = []
        report["recommendation"] = {"decision": "insufficient_evidence", "policy": None,
                                    "reason": f"insufficient evidence: {why}"}
        return report
    step("replay with bootstrap")
    results = replay(h, live, {c.name: c.policy for c in candidates}, replicates=replicates, seed=seed)
    sources = [("live", live)] + [(c.source, c.policy) for c in candidates]
    report["policies"] = [{**policy_entry(r, pol, src), "changes": policy_changes(live, pol)}
                          for r, (src, pol) in zip(results, sources, strict=True)]
    off = []
    for name, policy in [("live-greedy", live)] + [(c.name, c.policy) for c in candidates]:
        step(f"off-policy estimates: {name}")
        off.append({"name": name, **evaluate(h, policy, live, name=name).as_dict()})
    if h.shadow.max(initial=-1) >= 0:
        step("off-policy estimates: shadow candidate")
        off.append({"name": "shadow-candidate", **evaluate(h, live, live, actions="shadow",
                                                            name="shadow-candidate").as_dict()})
    report["off_policy"] = off
    report["recommendation"] = recommend(report["policies"], margins)
    return report


def write_report(report: dict[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """``report.json`` and the self-contained ``report.html`` in ``out_dir``."""
    from .report_html import render_html

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out / "policy_report.json", out / "policy_report.html"
    json_path.write_text(json.dumps(_clean(report), indent=2, default=_json_default, allow_nan=False))
    html_path.write_text(render_html(report))
    return json_path, html_path


def _clean(value: Any) -> Any:
    """NaN and infinities become ``null``: JSON has no such numbers."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def recommendation_lines(report: dict[str, Any]) -> list[str]:
    """The decision with the chosen candidate's changes, then each candidate: its changes and verdict."""
    rec = report["recommendation"]
    head = f"{rec['decision']}"
    if rec.get("policy"):
        head += f" -> {rec['policy']} ({describe_changes(rec.get('changes', []), limit=20)})"
    reason = str(rec.get("reason") or "")
    # a reason that opens with the decision's own words says it once ("no clear winner: …")
    lines = [reason if reason.startswith(head.replace("_", " ") + ":") else f"{head}: {reason}"]
    lines += [f"warning: {w}" for w in (report.get("baseline") or {}).get("warnings", [])]
    verdicts = {v["name"]: v for v in rec.get("candidates", [])}
    for c in report.get("candidates", []):
        v = verdicts.get(c["name"], {})
        lines.append(f"  candidate {c['name']}: {describe_changes(c.get('changes', []), limit=20)}"
                     + (f"; {verdict_text(v)}" if v else ""))
        lines += [f"    for {agent} alone (its own tasks and logged retries): {verdict_text(av)}"
                  for agent, av in differing_agents(v)]
    return lines
