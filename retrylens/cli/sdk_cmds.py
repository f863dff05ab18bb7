"""Agent-side commands: ``simulate`` (naive vs governed fleet) and ``policy validate``."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from retrylens.errors import ConfigError

from .common import console, handle_errors

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
) -> None:
    """Run the same seeded fleet under a naive retry policy and under the governor; then
    multi-step tasks whose tools take no idempotency key under a naive per-call loop, the
    plain governor wiring (call + decorated tools) and the same with ``verify=``."""
    from retrylens.simulation import load_scenario, run_fleet
    from retrylens.simulation.unkeyed_tools import WIRINGS, run_unkeyed

    fleet = load_scenario(scenario)
    results = {
        driver: run_fleet(fleet, tasks=tasks, seed=seed, driver=driver, validate_events=False)
        for driver in ("naive", "governor")
    }
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


@policy_app.command("validate")
@handle_errors
def validate(path: Path = typer.Argument(..., help="Policy file (YAML or JSON).")) -> None:
    """Check a retry policy file; a bad one names the field and exits with code 2."""
    from retrylens.errors import PolicyError
    from retrylens.sdk.policy import load_policy

    try:
        policy = load_policy(path)
    except PolicyError as exc:
        raise ConfigError(str(exc)) from exc
    typer.echo(json.dumps({"valid": True, "id": policy.id, "version": policy.version}))
