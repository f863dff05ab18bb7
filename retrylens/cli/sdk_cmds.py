"""Agent-side commands: ``simulate`` (naive vs governed fleet) and ``policy validate``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from retrylens.errors import ConfigError

from .common import ConfigOption, console, handle_errors, settings_from

policy_app = typer.Typer(help="Retry policy files.", no_args_is_help=True)

COMPARED = (
    "success_rate",
    "attempts",
    "wasted_attempts",
    "duplicate_side_effects",
    "tokens",
    "cost_usd",
    "handoffs",
    "loops",
)


UNKEYED_LABELS = {
    "naive": "naive per-call loop",
    "plain": "governor: call + decorated tools",
    "verified": "… + verify=",
}


def register(app: typer.Typer) -> None:
    app.command()(simulate)
    app.add_typer(policy_app, name="policy")


@handle_errors
def simulate(
    tasks: int = typer.Option(500, "--tasks", min=1, max=1_000_000, help="Tasks in the fleet."),
    seed: int = typer.Option(
        7, "--seed", help="Seed: the same seed gives the same fleet and faults."
    ),
    scenario: Path | None = typer.Option(
        None, "--scenario", help="Scenario YAML (default: the packaged one)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    unkeyed_tasks: int = typer.Option(
        200,
        "--unkeyed-tasks",
        min=0,
        max=100_000,
        help="Multi-step tasks with unkeyed tools, run under three wirings (0: skip).",
    ),
    record: bool = typer.Option(
        False, "--record",
        help="Also write the governed fleet's events into the store (through the running server when one owns it), "
        "ending now, so the dashboard shows them.",
    ),
    config: Path | None = ConfigOption,
) -> None:
    """Run the same seeded fleet under a naive retry policy and under the governor; then
    multi-step tasks whose tools take no idempotency key under a naive per-call loop, the
    plain governor wiring (call + decorated tools) and the same with ``verify=``."""
    from retrylens.simulation import load_scenario, run_fleet
    from retrylens.simulation.unkeyed_tools import WIRINGS, run_unkeyed

    fleet = load_scenario(scenario)
    results = {"naive": run_fleet(fleet, tasks=tasks, seed=seed, driver="naive", validate_events=False)}
    recorded = None
    if record:
        results["governor"], recorded = _recorded_fleet(fleet, tasks=tasks, seed=seed, config=config)
    else:
        results["governor"] = run_fleet(fleet, tasks=tasks, seed=seed, driver="governor", validate_events=False)
    payload = {
        "scenario": fleet.name,
        "tasks": tasks,
        "seed": seed,
        **{
            driver: {
                key: result.to_dict()[key]
                for key in (*COMPARED, "succeeded", "events_emitted", "policy_id", "policy_version")
            }
            for driver, result in results.items()
        },
    }
    if recorded is not None:
        payload["recorded"] = recorded
    if unkeyed_tasks:
        payload["unkeyed_tools"] = {
            wiring: run_unkeyed(wiring, tasks=unkeyed_tasks, seed=seed).to_dict()
            for wiring in WIRINGS
        }
    if as_json:
        typer.echo(json.dumps(payload))
        return
    table = Table(title=f"{tasks} tasks, seed {seed}, scenario {fleet.name}")
    table.add_column("metric")
    table.add_column("naive", justify="right")
    table.add_column("governor", justify="right")
    for key in COMPARED:
        table.add_row(key, str(payload["naive"][key]), str(payload["governor"][key]))
    console.print(table)
    if recorded is not None:
        console.print(f"Recorded the governed fleet: {recorded['events_emitted']} events emitted, "
                      f"{recorded['events_stored']} new in the store ({recorded['store']}).")
    if unkeyed_tasks:
        steps = Table(
            title=f"{unkeyed_tasks} multi-step tasks, tools with no idempotency key, seed {seed}"
        )
        steps.add_column("metric")
        for wiring in WIRINGS:
            steps.add_column(UNKEYED_LABELS[wiring], justify="right")
        for key in ("succeeded", "handed_off", "failed", "tool_calls", "duplicate_side_effects"):
            steps.add_row(key, *(str(payload["unkeyed_tools"][w][key]) for w in WIRINGS))
        console.print(steps)


def _recorded_fleet(fleet: Any, *, tasks: int, seed: int, config: Path | None) -> tuple[Any, dict[str, Any]]:
    """Run the governed fleet with its events sent into the store (as ``demo`` records its fleet),
    ending now; returns the fleet's result and what reached the store."""
    from datetime import UTC, datetime, timedelta

    from retrylens.sdk.transport import build_emitter
    from retrylens.simulation import run_fleet

    from . import demo_loop
    from .road import open_road

    settings = settings_from(config)
    road = open_road(settings)
    if settings.uses_kafka:
        from retrylens.ingest.kafka_clients import ensure_topics

        ensure_topics(settings)
    before = road.run("store.stats")["events"]
    emitter = build_emitter(settings, name="simulate")
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=fleet.span_hours)
    result = run_fleet(fleet, tasks=tasks, seed=seed, driver="governor", emit=emitter.emit, start=start)
    flushed = demo_loop.ingest(settings, road, emitter, expect=before + result.events_emitted)
    emitter.close()
    stored = road.run("store.stats")["events"] - before
    where = settings.effective_dsn if settings.is_embedded_store else settings.clickhouse_dsn
    return result, {"events_emitted": result.events_emitted, "events_stored": stored, "flushed": flushed,
                    "store": road.url or where}


@policy_app.command("validate")
@handle_errors
def validate(path: Path = typer.Argument(..., help="Policy file (YAML or JSON).")) -> None:
    """Check a retry policy file; a bad one names the field and exits with code 2."""
    from retrylens.errors import PolicyError
    from retrylens.sdk.core.policy import load_policy

    try:
        policy = load_policy(path)
    except PolicyError as exc:
        raise ConfigError(str(exc)) from exc
    typer.echo(json.dumps({"valid": True, "id": policy.id, "version": policy.version}))
