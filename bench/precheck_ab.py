"""Do pre-checks pay? The demo's A/B over scenarios and seeds: the same tasks and faults, with and without.

For each scenario in the repository (``simulation/*.yaml``, or ``--scenario FILE`` …) and
each seed, the demo's loop on a fresh store (:mod:`retrylens.cli.demo_loop`): the first
``--learn-share`` of the seeded fleet is recorded and the risk model trained on it (and
the advice book built from its history), then the rest runs twice on the same seeded
faults — pre-checked through the real API app and governed with the advice, and without
any pre-check. Events are stored directly (the emitter and spool road is the demo's and
changes no figure). Figures per run and pooled over seeds: success rate, cost, hand-offs
with and without, and per advice kind the paired per-task difference (with − without) of
success, cost and hand-offs with 95 % bootstrap CIs over the tasks that received it.

Per seed the same is also broken down per agent (``by_agent``) and per advice kind. ``--jobs N``
runs N (scenario, seed) runs at once, each in a process of its own (chDB opens one data
directory per process); the figures do not depend on it.

``--json`` prints one object. Usage:
``python bench/precheck_ab.py [--json] [--tasks N] [--seeds 7,8,9] [--jobs N] [--scenario FILE ...]
[--no-shared-state]``. ``--no-shared-state`` is a probe, not a product setting: each scenario
without its fleet-wide circuit breaker and retry throttle (named ``<scenario>-unshared``), so a
seed's totals no longer carry the coupling ``bench/fleet_coupling.py`` measures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from retrylens.cli import demo_loop
from retrylens.cli.road import LocalRoad
from retrylens.config import load_settings
from retrylens.simulation import Scenario, load_scenario, run_fleet
from retrylens.store import open_store
from retrylens.store.event_table import event_row

ROOT = Path(__file__).resolve().parents[1]
START = datetime(2026, 11, 1, tzinfo=UTC)
R = TypeVar("R")


def scenarios() -> list[Path]:
    return sorted((ROOT / "simulation").glob("*.yaml"))


def without_shared_state(scenario: Scenario) -> Scenario:
    """The probe: the scenario with no circuit breaker and no retry throttle shared by the
    fleet, so one task's calls cannot change another's (what tasks learn from the failure
    history of recurring inputs still passes between them)."""
    policy = {**scenario.policy, "breaker": {"enabled": False}, "fleet_budget": {"enabled": False}}
    return scenario.model_copy(update={"policy": policy, "name": f"{scenario.name}-unshared"})


def in_processes(function: Callable[..., R], calls: list[tuple[Any, ...]], jobs: int) -> list[R]:
    """``function(*call)`` for each call, in order; with ``jobs > 1`` that many at once, each in a
    fresh spawned process (chDB opens one data directory per process)."""
    if jobs <= 1:
        return [function(*call) for call in calls]
    with ProcessPoolExecutor(
        jobs, mp_context=multiprocessing.get_context("spawn"), max_tasks_per_child=1
    ) as pool:
        return list(pool.map(function, *zip(*calls, strict=True)))


def _store_events(store: Any, events: list[Any], offset: int) -> int:
    store.insert_rows(
        [event_row(e, topic="bench", partition=0, offset=offset + i) for i, e in enumerate(events)]
    )
    return offset + len(events)


def one_run(
    scenario_path: Path,
    seed: int,
    tasks: int,
    learn_share: float,
    chdb: Path,
    data: Path,
    shared_state: bool = True,
) -> dict[str, Any]:
    settings = load_settings(
        data_dir=data / uuid.uuid4().hex[:8],
        clickhouse_dsn=f"chdb://{chdb}",
        clickhouse_database=f"ab_{uuid.uuid4().hex[:10]}",
        kafka_bootstrap_servers="",
    )
    store = open_store(settings)
    scenario = load_scenario(scenario_path)
    if not shared_state:
        scenario = without_shared_state(scenario)
    first, rest = range(0, int(tasks * learn_share)), range(int(tasks * learn_share), tasks)
    events: list[Any] = []
    run_fleet(scenario, tasks=tasks, seed=seed, emit=events.append, task_range=first, start=START)
    offset = _store_events(store, events, 0)
    road = LocalRoad(settings, store)
    model = demo_loop.train(road)
    log = demo_loop.PrecheckLog()
    events = []
    with demo_loop.api_preflights(settings, road, log) as preflight:
        checked = demo_loop.run_part(
            scenario,
            tasks=tasks,
            seed=seed,
            part=rest,
            start=START,
            emit=events.append,
            preflight=preflight,
        )
    _store_events(store, events, offset)
    plain = demo_loop.run_part(scenario, tasks=tasks, seed=seed, part=rest, start=START)
    store.client.command(f"DROP DATABASE IF EXISTS `{settings.clickhouse_database}`")
    return {
        "scenario": scenario.name,
        "seed": seed,
        "model": model,
        "advice": dict(log.advice),
        **paired(checked, plain, log.by_task),
    }


def _task_figures(tallies: list[Any]) -> dict[str, np.ndarray]:
    return {
        "success": np.array([t.outcome.value == "succeeded" for t in tallies], dtype=float),
        "cost_usd": np.array([t.cost_usd for t in tallies]),
        "handoff": np.array([t.handed_off for t in tallies], dtype=float),
    }


def paired(checked: Any, plain: Any, advice: dict[str, list[str]]) -> dict[str, Any]:
    a, b = _task_figures(checked.tallies), _task_figures(plain.tallies)
    ids = [t.task_id for t in checked.tallies]
    assert ids == [t.task_id for t in plain.tallies]
    kinds: dict[str, list[int]] = {}
    agents: dict[str, list[int]] = {}
    for i, task_id in enumerate(ids):
        for kind in advice.get(task_id) or ["none"]:
            kinds.setdefault(kind, []).append(i)
        agents.setdefault(checked.tallies[i].agent, []).append(i)
    return {
        "tasks": len(ids),
        "with_prechecks": {
            "success_rate": float(a["success"].mean()),
            "cost_usd": float(a["cost_usd"].sum()),
            "handoffs": int(a["handoff"].sum()),
        },
        "without": {
            "success_rate": float(b["success"].mean()),
            "cost_usd": float(b["cost_usd"].sum()),
            "handoffs": int(b["handoff"].sum()),
        },
        "diffs": {m: (a[m] - b[m]).tolist() for m in a},
        "task_ids": ids,
        "cost_per_task_without": b["cost_usd"].tolist(),
        "kinds": kinds,
        "agents": agents,
    }


def bootstrap(values: np.ndarray, *, replicates: int = 2000, seed: int = 0) -> dict[str, float]:
    """Mean and 95 % percentile bootstrap CI of per-task paired differences."""
    if len(values) == 0:
        return {"n": 0, "value": float("nan"), "lo": float("nan"), "hi": float("nan")}
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(replicates, len(values)))].mean(axis=1)
    return {
        "n": int(len(values)),
        "value": float(values.mean()),
        "lo": float(np.quantile(means, 0.025)),
        "hi": float(np.quantile(means, 0.975)),
    }


def effects(runs: list[dict[str, Any]], by: str = "kinds") -> dict[str, Any]:
    """Per advice kind (or per agent, ``by="agents"``), pooled over ``runs``: the paired
    differences with CIs."""
    pooled: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        for kind, rows in run[by].items():
            for m, diffs in run["diffs"].items():
                pooled.setdefault(kind, {}).setdefault(m, []).extend(diffs[i] for i in rows)
    return {
        kind: {m: bootstrap(np.array(v)) for m, v in figures.items()}
        for kind, figures in sorted(pooled.items())
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in sorted({r["scenario"] for r in runs}):
        mine = [r for r in runs if r["scenario"] == name]
        out[name] = {
            "seeds": [r["seed"] for r in mine],
            "per_seed": [
                {
                    "seed": r["seed"],
                    "with": r["with_prechecks"],
                    "without": r["without"],
                    "advice": r["advice"],
                    "by_advice": effects([r]),
                    "model_auc": r["model"].get("roc_auc"),
                    "success_not_lower": r["with_prechecks"]["success_rate"]
                    >= r["without"]["success_rate"],
                    "cost_lower": r["with_prechecks"]["cost_usd"] < r["without"]["cost_usd"],
                    "diff": {
                        m: bootstrap(np.array(r["diffs"][m]))
                        for m in ("success", "cost_usd", "handoff")
                    },
                }
                for r in mine
            ],
            "success_not_lower_every_seed": all(
                r["with_prechecks"]["success_rate"] >= r["without"]["success_rate"] for r in mine
            ),
            "cost_lower_every_seed": all(
                r["with_prechecks"]["cost_usd"] < r["without"]["cost_usd"] for r in mine
            ),
            "pooled": {
                m: bootstrap(np.array([d for r in mine for d in r["diffs"][m]]))
                for m in ("success", "cost_usd", "handoff")
            },
            "by_advice": effects(mine),
            "by_agent": effects(mine, "agents"),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--seeds", default="7,8,9")
    parser.add_argument("--learn-share", type=float, default=0.5)
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, one process each")
    parser.add_argument(
        "--scenario", type=Path, action="append", help="scenario file(s); default: every one"
    )
    parser.add_argument(
        "--no-shared-state",
        action="store_true",
        help="a probe: no circuit breaker or retry throttle shared by the fleet (bench/fleet_coupling.py)",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny size: the test suite's smoke run")
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.seeds = 60, "7"
        args.scenario = args.scenario or scenarios()[:1]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    began = time.perf_counter()
    jobs = [(path, seed) for path in args.scenario or scenarios() for seed in seeds]
    with tempfile.TemporaryDirectory(prefix="precheck-ab-", ignore_cleanup_errors=True) as tmp:
        calls = [
            (
                path,
                seed,
                args.tasks,
                args.learn_share,
                Path(tmp) / f"chdb-{i % args.jobs}",
                Path(tmp),
                not args.no_shared_state,
            )
            for i, (path, seed) in enumerate(jobs)
        ]
        runs = in_processes(one_run, calls, args.jobs)
    if not args.json:
        for r in runs:
            print(
                f"{r['scenario']} seed {r['seed']}: success {r['with_prechecks']['success_rate']:.4f} vs "
                f"{r['without']['success_rate']:.4f}, cost {r['with_prechecks']['cost_usd']:.4f} vs "
                f"{r['without']['cost_usd']:.4f}, hand-offs {r['with_prechecks']['handoffs']} vs "
                f"{r['without']['handoffs']}; advice {r['advice']}",
                file=sys.stderr,
            )
    result = {
        "tasks": args.tasks,
        "learn_share": args.learn_share,
        "seconds": round(time.perf_counter() - began, 1),
        "scenarios": summary(runs),
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    for name, s in result["scenarios"].items():
        print(
            f"\n{name}: success not lower on every seed: {s['success_not_lower_every_seed']}; "
            f"cost lower on every seed: {s['cost_lower_every_seed']}"
        )
        print(
            "  seed | success with / without [Δ 95 % CI] | cost USD with / without [Δ per task 95 % CI] | hand-offs"
        )
        for r in s["per_seed"]:
            ds, dc = r["diff"]["success"], r["diff"]["cost_usd"]
            print(
                f"  {r['seed']} | {r['with']['success_rate']:.4f} / {r['without']['success_rate']:.4f} "
                f"[{ds['lo']:+.4f}, {ds['hi']:+.4f}] | {r['with']['cost_usd']:.4f} / {r['without']['cost_usd']:.4f} "
                f"[{dc['lo']:+.6f}, {dc['hi']:+.6f}] | {r['with']['handoffs']} / {r['without']['handoffs']}"
            )
        for m, e in s["pooled"].items():
            print(
                f"  pooled Δ{m} per task {e['value']:+.5f} [{e['lo']:+.5f}, {e['hi']:+.5f}] (n={e['n']})"
            )
        for kind, by in s["by_advice"].items():
            words = ", ".join(
                f"Δ{m} {e['value']:+.4f} [{e['lo']:+.4f}, {e['hi']:+.4f}]" for m, e in by.items()
            )
            print(f"  {kind} (n={by['success']['n']}): {words}")


if __name__ == "__main__":
    main()
