"""A candidate's per-agent verdicts reach every reader of the report, each worded once.

Session 16 found the CLI listed an agent's own verdict where it differed from the fleet's,
but the HTML report and the dashboard showed only the fleet's; and a "no difference" line
said its verdict twice ("no difference beyond the uncertainty: … : no difference beyond the
uncertainty"). A planted split: intake's own tasks gain beyond the margin, audit's do not
move, so the fleet's pooled gain sits inside the uncertainty.
"""

from __future__ import annotations

from typing import Any

from retrylens.dashboard.report_view import candidate_rows
from retrylens.evaluation.report import recommend, recommendation_lines
from retrylens.evaluation.report_html import _candidates_section
from retrylens.evaluation.verdict_words import VERDICT_WORDS

CHANGES = [{"field": "caps.validation", "live": 1, "candidate": 3}]
NO_DIFFERENCE = VERDICT_WORDS["within_uncertainty"]


def _side(success: tuple[float, float, float]) -> dict[str, Any]:
    value, lo, hi = success
    return {"estimates": {"cost_usd": {"value": 0.01, "lo": 0.01, "hi": 0.01}},
            "diff_vs_live": {"success": {"value": value, "lo": lo, "hi": hi},
                             "cost_usd": {"value": 0.0, "lo": -1e-4, "hi": 1e-4}},
            "imputed_share": 0.0, "truncated_share": 0.0, "decision_divergence": 0.0}


def _report(intake: tuple[float, float, float], audit: tuple[float, float, float],
            fleet: tuple[float, float, float]) -> dict[str, Any]:
    live = {"name": "live", **_side((0.0, 0.0, 0.0)), "changes": [],
            "by_agent": {"intake-agent": _side((0.0, 0.0, 0.0)), "audit-agent": _side((0.0, 0.0, 0.0))}}
    candidate = {"name": "more-validation", **_side(fleet), "changes": CHANGES,
                 "by_agent": {"intake-agent": _side(intake), "audit-agent": _side(audit)}}
    return {"recommendation": recommend([live, candidate]),
            "candidates": [{"name": "more-validation", "source": "file", "changes": CHANGES}]}


SPLIT = _report(intake=(0.12, 0.09, 0.15), audit=(0.0, -0.002, 0.002), fleet=(0.01, -0.01, 0.03))
AGREE = _report(intake=(0.0, -0.002, 0.002), audit=(0.0, -0.002, 0.002), fleet=(0.0, -0.002, 0.002))


def test_the_planted_split_gives_the_fleet_and_each_agent_their_own_verdict() -> None:
    (verdict,) = SPLIT["recommendation"]["candidates"]
    assert verdict["verdict"] == "within_uncertainty"
    assert verdict["by_agent"]["intake-agent"]["verdict"] == "better"
    assert verdict["by_agent"]["audit-agent"]["verdict"] == "within_uncertainty"


def test_every_cli_line_says_its_verdict_once() -> None:
    lines = recommendation_lines(SPLIT)
    audit = next(line for line in lines if "for audit-agent alone" in line)
    fleet = next(line for line in lines if "candidate more-validation" in line)
    assert audit.count(NO_DIFFERENCE) == 1, audit
    assert fleet.count(NO_DIFFERENCE) == 1, fleet
    assert "better beyond the margin" in next(line for line in lines if "for intake-agent alone" in line)


def test_the_html_report_lists_each_agents_verdict_where_they_differ() -> None:
    html = _candidates_section(SPLIT)
    assert "for intake-agent alone" in html and "for audit-agent alone" in html
    intake_row = html[html.index("for intake-agent alone"):].split("</tr>")[0]
    assert "better beyond the margin" in intake_row


def test_the_dashboard_lists_each_agents_verdict_where_they_differ() -> None:
    rows = candidate_rows(SPLIT)
    assert [r["candidate"].split(",")[0] for r in rows] == ["more-validation"] * 3
    by_agent = {r["candidate"]: r["verdict"] for r in rows[1:]}
    assert by_agent == {
        "more-validation, for intake-agent alone (its own tasks and logged retries)": "better beyond the margin",
        "more-validation, for audit-agent alone (its own tasks and logged retries)": NO_DIFFERENCE}


def test_agents_that_agree_with_the_fleet_add_no_lines() -> None:
    assert len(candidate_rows(AGREE)) == 1
    assert "alone" not in _candidates_section(AGREE)
    assert not [line for line in recommendation_lines(AGREE) if "alone" in line]


def test_a_hostile_agent_name_is_escaped_in_the_html() -> None:
    report = _report(intake=(0.12, 0.09, 0.15), audit=(0.0, -0.002, 0.002), fleet=(0.01, -0.01, 0.03))
    verdict = report["recommendation"]["candidates"][0]
    verdict["by_agent"]["<img src=//x>"] = verdict["by_agent"].pop("audit-agent")
    html = _candidates_section(report)
    assert "<img" not in html and "&lt;img src=//x&gt;" in html
