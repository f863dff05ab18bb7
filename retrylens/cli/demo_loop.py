"""The product's whole loop on one store: record, learn, pre-check, govern, report.

What ``retrylens demo`` runs, step by step (each step is real product code, nothing faked):

1. the seeded fleet's first part runs under the governor; its events travel the configured
   road (spool → store embedded, or Kafka → consumer → store) and are stored;
2. the failure classifier is trained on the stored tasks (``retrylens train``'s code) and
   saved as the current model version;
3. the rest of the fleet is pre-checked before each task through the API's own code path
   (the FastAPI app in process, ``POST /v1/precheck``, the SDK's :class:`Preflight`) and
   governed with that advice; the same tasks are also run once more *without* pre-checks,
   recording nothing, which is what the pre-checks changed;
4. a policy report (live policy vs two candidates, from the stored history) is written
   where the dashboard's reports page finds it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from retrylens.config import Settings
from retrylens.ingest.consumer import IngestConsumer
from retrylens.ingest.spool_ingestor import SpoolIngestor
from retrylens.sdk.transport import Emitter
from retrylens.simulation import run_fleet
from retrylens.simulation.fleet import FleetResult
from retrylens.simulation.scenario import Scenario
from retrylens.simulation.truth import truth_of
from retrylens.store import EventStore

#: Candidate policies the demo's report compares with the live one (merged over it).
CANDIDATES: dict[str, dict[str, Any]] = {
    "conservative": {
        "version": "demo-c",
        "caps": {"timeout": 1, "rate_limit": 2, "server_error": 1, "network": 1, "logic": 0},
        "budget": {"max_attempts": 3},
    },
    "aggressive": {
        "version": "demo-a",
        "caps": {"timeout": 5, "rate_limit": 5, "server_error": 5, "network": 5, "logic": 2},
        "budget": {"max_attempts": 8},
    },
}

@dataclass
class PrecheckLog:
    """What the pre-flight API advised, task by task (counted by the demo, not by the API)."""

    checked: int = 0
    advice: Counter[str] = field(default_factory=Counter)
    risks: list[float] = field(default_factory=list)
    #: task id → the advice kinds its answer carried (for the per-kind effect of :func:`advice_effects`)
    by_task: dict[str, list[str]] = field(default_factory=dict)

    def record(self, answer: Any, task_id: str = "") -> None:
        from retrylens.api.precheck import advice_kinds

        self.checked += 1
        self.risks.append(answer.risk)
        kinds = advice_kinds(answer)
        self.advice.update(kinds)
        if task_id:
            self.by_task[task_id] = kinds

    def as_dict(self) -> dict[str, Any]:
        mean = sum(self.risks) / len(self.risks) if self.risks else None
        return {"checked": self.checked, "mean_risk": None if mean is None else round(mean, 4),
                "advice": dict(sorted(self.advice.items()))}


def ingest(settings: Settings, store: EventStore, emitter: Emitter) -> bool:
    """Flush the emitter and carry everything it sent into the store; True if all flushed."""
    flushed = emitter.flush(timeout_s=300)
    if settings.uses_kafka:
        IngestConsumer(settings, store).run(idle_exit_s=5)
    else:
        SpoolIngestor(settings, store).drain()
    return flushed


def train(settings: Settings, store: EventStore) -> dict[str, Any]:
    """``retrylens train`` on the stored first part: the new current model's version and figures."""
    from retrylens.analytics.model_store import ModelStore, models_dir
    from retrylens.analytics.training import train_from_store

    result = train_from_store(store, model_store=ModelStore(models_dir(settings)))
    metrics = result.meta.get("metrics", {})
    return {"version": result.version, "n_train": result.meta.get("n_train"),
            **{k: metrics[k] for k in ("roc_auc", "brier") if k in metrics}}


@contextmanager
def api_preflights(settings: Settings, store: EventStore, log: PrecheckLog) -> Iterator[Callable[[str], Any]]:
    """Per-project :class:`Preflight` clients that reach the real API app in process."""
    import warnings

    with warnings.catch_warnings():  # starlette's advice to its own users, not to ours
        warnings.simplefilter("ignore", DeprecationWarning)
        from fastapi.testclient import TestClient

    from retrylens.api.app import create_app
    from retrylens.api.auth import local_token
    from retrylens.sdk.preflight import Preflight

    class LoggedPreflight(Preflight):
        def check(self, request: Any) -> Any:
            answer = super().check(request)
            if answer is not None:
                log.record(answer, request.task_id)
            return answer

    with TestClient(create_app(settings, store)) as http:
        token = local_token(settings)
        yield lambda _project: LoggedPreflight("http://testserver", api_key=token, client=http)


def run_part(scenario: Scenario, *, tasks: int, seed: int, part: range, start: datetime, emit: Any = None,
             preflight: Any = None, step: Callable[[Any], None] | None = None) -> FleetResult:
    """One part of the seeded fleet, on the timeline starting at ``start``."""
    return run_fleet(scenario, tasks=tasks, seed=seed, emit=emit, task_range=part, preflight=preflight,
                     on_task=step, start=start)


def changed(with_checks: FleetResult, without: FleetResult) -> dict[str, Any]:
    """The same tasks with and without pre-checks: the pre-checks' own effect."""
    names = ("success_rate", "attempts", "wasted_attempts", "handoffs", "duplicate_side_effects", "tokens",
             "cost_usd")
    a, b = with_checks.to_dict(), without.to_dict()
    return {name: {"with_prechecks": a[name], "without_prechecks": b[name]} for name in names}


def combined(parts: list[FleetResult]) -> dict[str, Any]:
    """The whole fleet's figures from its parts (tallies concatenated, counts summed)."""
    tallies = [t for p in parts for t in p.tallies]
    total = {
        "driver": parts[0].driver, "scenario": parts[0].scenario, "seed": parts[0].seed,
        "tasks": sum(p.tasks for p in parts), "succeeded": sum(p.succeeded for p in parts),
        "attempts": sum(p.attempts for p in parts), "wasted_attempts": sum(p.wasted_attempts for p in parts),
        "duplicate_side_effects": sum(p.duplicate_side_effects for p in parts),
        "tokens": sum(p.tokens for p in parts), "cost_usd": round(sum(p.cost_usd for p in parts), 4),
        "handoffs": sum(p.handoffs for p in parts), "loops": sum(p.loops for p in parts),
        "events_emitted": sum(p.events_emitted for p in parts),
        "policy_id": parts[0].policy_id, "policy_version": parts[0].policy_version,
    }
    total["success_rate"] = round(total["succeeded"] / total["tasks"], 4) if total["tasks"] else 0.0
    return {"fleet": total, "truth": truth_of(tallies)}


def policy_report(settings: Settings, store: EventStore, live: Any, *, seed: int,
                  progress: Callable[[str], None]) -> dict[str, Any]:
    """``retrylens report policies`` over the stored history, written under ``<data_dir>/reports``."""
    from retrylens.evaluation.candidates import Candidate, overlay
    from retrylens.evaluation.history import build_history, read_frame
    from retrylens.evaluation.report import build_report, write_report
    from retrylens.evaluation.shadow import compare_shadow

    candidates = [
        Candidate(name, overlay(live, {"id": name, **changes}, source=f"demo candidate {name}"), f"demo:{name}")
        for name, changes in CANDIDATES.items()
    ]
    history = build_history(read_frame(store))
    shadow = compare_shadow(store)
    report = build_report(history, live, candidates, shadow=shadow, replicates=200, seed=seed, progress=progress)
    out = Path(settings.data_dir) / "reports" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    json_path, html_path = write_report(report, out)
    rec = report["recommendation"]
    from .report_cmds import recommendation_lines

    return {"html": str(html_path), "json": str(json_path), "recommendation": rec["decision"],
            "policy": rec["policy"], "reason": rec["reason"], "changes": rec.get("changes", []),
            "lines": recommendation_lines(report)}
