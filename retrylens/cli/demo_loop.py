"""The product's whole loop on one store: record, learn, pre-check, govern, report.

What ``retrylens demo`` runs, step by step (each step is real product code, nothing faked), on
the store opened here or, while a ``retrylens serve`` owns it, through that server (:mod:`.road`):

1. the seeded fleet's first part runs under the governor; its events travel the configured
   road (spool → store embedded, or Kafka → consumer → store) and are stored;
2. the failure classifier is trained on the stored tasks (``retrylens train``'s code) and
   saved as the current model version;
3. the rest of the fleet is pre-checked before each task through the API's own code path
   (the FastAPI app served on a loopback port, or the running server, ``POST /v1/precheck``,
   the SDK's :class:`Preflight`) and
   governed with that advice; the same tasks are also run once more *without* pre-checks,
   recording nothing, which is what the pre-checks changed;
4. a policy report (live policy vs two candidates, from the stored history) is written
   where the dashboard's reports page finds it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from retrylens.config import Settings
from retrylens.ingest.spool_ingestor import SpoolIngestor
from retrylens.sdk.core.preflight import Preflight
from retrylens.sdk.transport import Emitter
from retrylens.simulation import run_fleet
from retrylens.simulation.fleet import FleetResult
from retrylens.simulation.scenario import Scenario
from retrylens.simulation.truth import truth_of

from .road import Road

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


def ingest(settings: Settings, road: Road, emitter: Emitter, *, expect: int, timeout_s: float = 300.0) -> bool:
    """Flush the emitter and carry everything it sent into the store; True if all flushed.

    On the store itself the spool (or the Kafka topic) is drained here. When a server owns the
    store, it drains the spool and the topic itself: wait until the store holds ``expect``
    distinct events, or until the count stops moving (events already stored by an earlier run
    of the same seed and start are not counted twice)."""
    flushed = emitter.flush(timeout_s=300)
    if road.store is not None:
        if settings.uses_kafka:
            from retrylens.ingest.consumer import (
                IngestConsumer,  # kafka-python only when Kafka is configured
            )

            IngestConsumer(settings, road.store).run(idle_exit_s=5)
        else:
            SpoolIngestor(settings, road.store).drain()
        return flushed
    deadline = time.monotonic() + timeout_s
    last, still = -1, 0
    while time.monotonic() < deadline:
        count = road.run("store.stats")["events"]
        if count >= expect:
            break
        still = still + 1 if count == last else 0
        if still >= 10:
            break
        last = count
        time.sleep(0.5)
    return flushed


def train(road: Road) -> dict[str, Any]:
    """``retrylens train`` on the stored first part, under the same rule as ``retrylens train``: the
    new model becomes current only if no worse than the one in force (a live server's). ``version``
    is the model in force afterwards (what the pre-checks score with); ``trained`` the new one."""
    result = road.run("train")
    metrics = result.get("metrics", {})
    promotion = result.get("promotion") or {}
    in_force = result["version"] if promotion.get("promoted", True) else promotion.get("current_version")
    return {"version": in_force or result["version"], "trained": result["version"],
            "promotion": promotion.get("reason"), "n_train": result.get("n_train"),
            **{k: metrics[k] for k in ("roc_auc", "brier") if k in metrics}}


class _LoggedPreflight(Preflight):
    """The SDK's pre-flight client, counting what the API advised."""

    def __init__(self, *args: Any, log: PrecheckLog, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._log = log

    def check(self, request: Any) -> Any:
        answer = super().check(request)
        if answer is not None:
            self._log.record(answer, request.task_id)
        return answer


@contextmanager
def api_preflights(settings: Settings, road: Road, log: PrecheckLog, *,
                   model_version: str | None = None) -> Iterator[Callable[[str], Any]]:
    """Per-project :class:`Preflight` clients that reach the real API over HTTP: the server that
    owns the store (once it scores with ``model_version``), or else the app on the store opened
    here, served by uvicorn on a loopback port this process picked, in a thread: the same
    server and client code a deployment runs (Starlette's test client is a test tool,
    deprecated with plain ``httpx``, and no part of a product run).
    """
    from retrylens.api.auth import local_token

    if road.url is not None:
        token = local_token(settings, create=False)
        _wait_for_model(road.url, token, model_version)
        yield lambda _project: _LoggedPreflight(road.url, api_key=token, log=log)
        return

    from retrylens.api.app import create_app

    token = local_token(settings)
    with serve_in_thread(create_app(settings, road.store)) as url, httpx.Client(timeout=60.0) as http:
        yield lambda _project: _LoggedPreflight(url, api_key=token, client=http, log=log)


@contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Serve ``app`` on ``127.0.0.1:<free port>`` until the block ends; yields its base URL."""
    import socket
    import threading

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                           ws="none"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="retrylens-demo-api",
                              daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the demo's API server did not start (see the log above)")
            threading.Event().wait(0.02)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def _wait_for_model(url: str, token: str | None, version: str | None, timeout_s: float = 30.0) -> None:
    """The server re-reads the current model every few seconds; pre-checks wait for the new one."""
    if version is None:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answer = httpx.get(f"{url}/v1/model", headers={"X-API-Key": token or ""}, timeout=10)
        if answer.status_code == 200 and answer.json().get("version") == version:
            return
        time.sleep(0.5)


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


def policy_report(road: Road, live: Any, *, seed: int, progress: Callable[[str], None]) -> dict[str, Any]:
    """``retrylens report policies`` over the stored history, written under ``<data_dir>/reports``."""
    from retrylens.evaluation.candidates import overlay

    candidates = [
        {"name": name, "source": f"demo:{name}",
         "policy": overlay(live, {"id": name, **changes}, source=f"demo candidate {name}").model_dump(mode="json")}
        for name, changes in CANDIDATES.items()
    ]
    found = road.run("report.policies", progress=progress, live=live.model_dump(mode="json"),
                     candidates=candidates, replicates=200, seed=seed)
    return {k: found[k] for k in ("html", "json", "recommendation", "policy", "reason", "changes", "lines")}
