"""Reports: insufficient evidence for tiny histories; the CLI writes self-contained HTML + JSON."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from eval_helpers import EXAMPLES
from typer.testing import CliRunner

from retrylens.cli.main import app
from retrylens.evaluation.candidates import load_candidates
from retrylens.evaluation.ground_truth import history_of, run_policy_events
from retrylens.evaluation.history import COLUMNS, build_history
from retrylens.evaluation.report import build_report, recommendation_lines, write_report
from retrylens.evaluation.shadow import compare_shadow
from retrylens.simulation import fleet_policy, load_scenario, run_fleet
from retrylens.store.event_table import event_row

runner = CliRunner()
SCENARIO = load_scenario()
LIVE = fleet_policy(SCENARIO)
FILES = [EXAMPLES / "conservative.yaml", EXAMPLES / "aggressive.yaml"]


def _self_contained(html: str) -> bool:
    external = re.search(r"<(script|link|img)[^>]+(src|href)=[\"']https?://", html, re.I)
    return external is None and "@import" not in html and "<style>" in html


@pytest.mark.parametrize("tasks", [0, 5])
def test_empty_or_tiny_history_says_the_evidence_is_insufficient(tmp_path, tasks) -> None:
    h = (history_of(run_policy_events(SCENARIO, tasks=tasks, seed=1)) if tasks
         else build_history(pd.DataFrame(columns=list(COLUMNS))))
    report = build_report(h, LIVE, load_candidates(FILES, LIVE))
    assert report["evidence"] == "insufficient" and report["policies"] == []
    assert report["recommendation"]["decision"] == "insufficient_evidence"
    json_path, html_path = write_report(report, tmp_path)
    assert "Insufficient evidence" in html_path.read_text()
    assert json.loads(json_path.read_text())["recommendation"]["policy"] is None


def test_report_compares_live_with_two_candidates_and_recommends_with_evidence(tmp_path) -> None:
    h = history_of(run_policy_events(SCENARIO, tasks=300, seed=4))
    report = build_report(h, LIVE, load_candidates(FILES, LIVE), replicates=200)
    assert [p["name"] for p in report["policies"]] == ["live", "conservative", "aggressive"]
    assert {o["name"] for o in report["off_policy"]} >= {"live-greedy", "conservative", "aggressive"}
    rec = report["recommendation"]
    assert rec["decision"] in {"no_clear_winner", "adopt_candidate"} and rec["reason"]
    assert [c["name"] for c in rec["candidates"]] == ["conservative", "aggressive"]
    _, html_path = write_report(report, tmp_path)
    html = html_path.read_text()
    assert _self_contained(html) and html.count("<svg") == len(report["metrics"])
    # every candidate named with what it changes against the live policy
    assert "Candidates and what they change" in html
    assert "caps.timeout: 3 → <b>1</b>" in html and "budget.max_attempts: 5 → <b>8</b>" in html


@pytest.mark.clickhouse
def test_shadow_comparison_is_computed_in_the_store(store) -> None:
    events = []
    run_fleet(SCENARIO, tasks=120, seed=9, emit=events.append)
    store.insert_rows([event_row(e, topic="t", partition=0, offset=i) for i, e in enumerate(events)])
    shadow = compare_shadow(store)
    decisions = [e for e in events if e.kind == "decision"]
    assert shadow.decisions == len(decisions)
    differ = sum(e.decision != e.shadow_decision for e in decisions)
    assert sum(r["n"] for r in shadow.disagreements) == differ
    assert sum(r["n"] for r in shadow.slices["agent"]) == len(decisions)
    assert compare_shadow(store, project="no-such-project").decisions == 0


@pytest.fixture
def env(settings, monkeypatch):  # noqa: ANN001, ANN201
    monkeypatch.setenv("RETRYLENS_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("RETRYLENS_CLICKHOUSE_DSN", settings.clickhouse_dsn)
    monkeypatch.setenv("RETRYLENS_CLICKHOUSE_DATABASE", settings.clickhouse_database)
    live = settings.data_dir.parent / "live.yaml"
    live.write_text(json.dumps(LIVE.model_dump(mode="json")))
    return live


@pytest.mark.clickhouse
def test_cli_writes_a_self_contained_html_and_a_json_report(env, store, tmp_path) -> None:
    events = []
    run_fleet(SCENARIO, tasks=200, seed=5, emit=events.append)
    store.insert_rows([event_row(e, topic="t", partition=0, offset=i) for i, e in enumerate(events)])
    out = tmp_path / "out"
    result = runner.invoke(app, ["report", "policies", "--live", str(env), "--candidates", str(FILES[0]),
                                 str(FILES[1]), "--out", str(out), "--replicates", "100"])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "policy_report.json").read_text())
    assert data["evidence"] == "sufficient" and data["history"]["tasks"] == 200
    assert [p["name"] for p in data["policies"]] == ["live", "conservative", "aggressive"]
    live = data["policies"][0]["estimates"]["success"]
    assert live["lo"] <= live["value"] <= live["hi"]
    assert data["shadow"]["decisions"] > 0 and data["recommendation"]["reason"]
    lines = result.output.splitlines()
    printed = recommendation_lines(data)  # whatever the decision: the printed lines are the report's
    assert printed[0] in lines and lines[lines.index(printed[0]):][: len(printed)] == printed
    assert any(line.startswith("  candidate conservative: ") and "caps.timeout 3 → 1" in line for line in lines)
    assert any(line.startswith("  candidate aggressive: ") and "budget.max_attempts 5 → 8" in line for line in lines)
    assert _self_contained((out / "policy_report.html").read_text())


def test_cli_rejects_a_malformed_candidate_with_exit_2(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("budget: {max_atempts: 3}\n")
    result = runner.invoke(app, ["report", "policies", "--candidates", str(bad), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "budget.max_atempts" in result.output and "Traceback" not in result.output
