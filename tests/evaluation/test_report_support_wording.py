"""'Not supported by the log' is said in every place an operator reads a verdict, with the way to the evidence."""

from __future__ import annotations

import json

import pytest

from retrylens.dashboard import report_view as view
from retrylens.evaluation.candidates import Candidate
from retrylens.evaluation.ground_truth import history_of, run_policy_events
from retrylens.evaluation.planted import SETUPS, candidates_of, scenario_of
from retrylens.evaluation.report import build_report, recommendation_lines, write_report
from retrylens.simulation import fleet_policy


@pytest.fixture(scope="module")
def report():  # noqa: ANN201
    setup = SETUPS["claims-gives-up-on-429"]
    scenario = scenario_of(setup)
    live = fleet_policy(scenario)
    h = history_of(run_policy_events(scenario, tasks=150, seed=3))
    chosen = [Candidate(name, policy, "planted") for name, policy in candidates_of(setup, live).items()]
    return build_report(h, live, chosen, replicates=100)


def test_the_report_json_names_the_verdict_its_bounds_and_the_gaps(report, tmp_path) -> None:
    json_path, _ = write_report(report, tmp_path)
    data = json.loads(json_path.read_text())
    verdict = data["recommendation"]["candidates"][0]
    assert verdict["verdict"] == "not_supported" and data["recommendation"]["decision"] == "no_clear_winner"
    candidate = data["policies"][1]
    assert candidate["unsupported_share"] > 0
    assert candidate["bounds"]["success"]["point_lo"] == 0.0 < candidate["bounds"]["success"]["point_hi"]
    assert candidate["support_gaps"][0]["error_type"] == "rate_limit"
    assert candidate["support_gaps"][0]["logged_retries"] == 0


def test_the_cli_lines_say_not_supported_and_how_to_get_the_evidence(report) -> None:
    lines = recommendation_lines(report)
    line = next(x for x in lines if x.startswith("  candidate retry-429"))
    assert "not supported by the log" in line
    assert "shadow.explore_stops 0.2 for about" in line and "canary on about" in line
    assert "not supported by the log: retry-429" in lines[0]
    assert not any(line.count("not supported by the log:") > 1 for line in lines)  # said once a line


def test_the_html_report_says_not_supported(report, tmp_path) -> None:
    _, html_path = write_report(report, tmp_path)
    html = html_path.read_text()
    assert html.count("not supported by the log") >= 2 and "shadow.explore_stops" in html


def test_the_dashboard_rows_say_not_supported_with_the_bounds(report) -> None:
    rows = view.candidate_rows(report)
    assert rows[0]["verdict"] == "not supported by the log"
    support = view.support_rows(report)
    assert support[0]["candidate"] == "retry-429" and support[0]["success difference (all fail … first succeeds)"]
    assert "rate_limit" in support[0]["retries the log never shows"]
