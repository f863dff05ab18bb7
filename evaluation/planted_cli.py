"""Explore, then judge, through the command line an operator types, held to planted truth.

:mod:`.planted` judges candidates in process. This runs the same loop as an operator
would: ``retrylens demo --scenario <planted scenario> --learn-share 0`` records the live
policy (with the shadow candidate explored at the setup's ``explore_stops`` rate) into an
embedded store, then ``retrylens report policies --candidates <candidate> --live <live>``
judges the candidate from that store. The truth is the candidate and the live policy
(without exploration) run live in the simulator on the same seed and start: the same tasks
and the same faults. ``tests/evaluation/test_explore_then_judge_cli.py`` holds the verdicts
to it; ``bench/explore_then_judge.py`` measures them over seeds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from retrylens.simulation import fleet_policy, run_fleet

from .candidates import overlay
from .ground_truth import history_of, scenario_for
from .history import observed_metrics
from .planted import Setup, scenario_of


def _cli(*args: str, env: dict[str, str], timeout: float) -> str:
    proc = subprocess.run([sys.executable, "-m", "retrylens", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"retrylens {args[0]} failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return proc.stdout


def _success(scenario: Any, *, tasks: int, seed: int, start: datetime) -> float:
    events: list[Any] = []
    run_fleet(scenario, tasks=tasks, seed=seed, driver="governor", emit=events.append, start=start,
              validate_events=False)
    return float(observed_metrics(history_of(events))["success"].mean())


def explore_then_judge(setup: Setup, *, seed: int, tasks: int, workdir: Path, replicates: int = 200,
                       timeout: float = 600.0) -> dict[str, Any]:
    """Record ``setup``'s live policy exploring its candidate with ``retrylens demo``, judge the
    candidate with ``retrylens report policies``; return the verdict, estimate, interval and truth."""
    if setup.explore is None or len(setup.candidates) != 1:
        raise ValueError("explore_then_judge needs a setup with one candidate that the live policy explores")
    name, _rate = setup.explore
    changes = setup.candidates[name]
    workdir.mkdir(parents=True, exist_ok=True)
    scenario = scenario_of(setup)
    scenario_file, live_file, candidate_file = (workdir / "scenario.yaml", workdir / "live.yaml",
                                                workdir / f"{name}.yaml")
    scenario_file.write_text(yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False))
    live_file.write_text(yaml.safe_dump(setup.live, sort_keys=False))
    candidate_file.write_text(yaml.safe_dump({"id": name, **changes}, sort_keys=False))
    start = (datetime.now(UTC) - timedelta(hours=scenario.span_hours + 1)).replace(microsecond=0)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETRYLENS_")}
    env.update({"RETRYLENS_DATA_DIR": str(workdir / "data"), "KAFKA_BOOTSTRAP_SERVERS": ""})
    demo = json.loads(_cli("demo", "--json", "--scenario", str(scenario_file), "--tasks", str(tasks), "--seed",
                           str(seed), "--learn-share", "0", "--start", start.isoformat(), env=env, timeout=timeout))
    out = workdir / "report"
    _cli("report", "policies", "--candidates", str(candidate_file), "--live", str(live_file), "--out",
                   str(out), "--replicates", str(replicates), "--seed", str(seed), env=env, timeout=timeout)
    report = json.loads((out / "policy_report.json").read_text())
    entry = next(p for p in report["policies"] if p["name"] == name)
    verdict = next(v for v in report["recommendation"]["candidates"] if v["name"] == name)
    live = fleet_policy(scenario)
    candidate = overlay(live, changes, source=name)
    truth = (_success(scenario_for(scenario, candidate), tasks=tasks, seed=seed, start=start)
             - _success(scenario_for(scenario, live), tasks=tasks, seed=seed, start=start))
    d = entry["diff_vs_live"]["success"]
    return {"setup": setup.name, "candidate": name, "seed": seed, "tasks": tasks,
            "events_stored": demo["events_stored"], "explored_decisions": report["history"]["explored_decisions"],
            "verdict": verdict["verdict"], "why": verdict["why"], "decision": report["recommendation"]["decision"],
            "estimate": d["value"], "ci": [d["lo"], d["hi"]], "unsupported_share": entry["unsupported_share"],
            "truth": truth, "truth_in_ci": bool(d["lo"] - 1e-12 <= truth <= d["hi"] + 1e-12)}
