"""``retrylens demo``: the main job end to end on the current settings.

A seeded simulated fleet emits retry events through the real emitter; they travel the
configured road (spool → store when embedded, Kafka → consumer → store when
``KAFKA_BOOTSTRAP_SERVERS`` is set). Then the product's loop (:mod:`.demo_loop`): a model is
trained on the recorded part, the rest of the fleet is pre-checked through the API and
governed with that advice, a policy report is written, and the figures are printed with
the command that opens the dashboard on the data.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from retrylens.config import Settings
from retrylens.sdk.transport import build_emitter
from retrylens.simulation import load_scenario, run_fleet
from retrylens.simulation.fleet import fleet_policy

from . import demo_loop
from .common import ConfigOption, handle_errors, progress_bars, settings_from
from .road import open_road

out = Console(soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command()(demo)


@handle_errors
def demo(
    tasks: int = typer.Option(1_000, min=1, max=1_000_000, help="Simulated tasks."),
    seed: int = typer.Option(7, help="Seed: the same seed gives the same fleet run."),
    scenario: Path | None = typer.Option(None, exists=True, dir_okay=False, help="Scenario YAML (fault model)."),
    driver: str = typer.Option("governor", help="governor (RetryLens SDK) or naive."),
    learn_share: float = typer.Option(
        0.5, min=0.0, max=0.9, help="Share of the fleet recorded before the model is trained; the rest runs "
        "pre-checked. 0 = record only (no model, no pre-checks, no report)."),
    start_at: datetime | None = typer.Option(
        None, "--start", formats=["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S"],
        help="Time of the fleet's first task (UTC if no offset); default: now minus the scenario's span. "
        "The same seed and start give the same run, pre-check advice included."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    config: Path | None = ConfigOption,
) -> None:
    """The whole loop: record a fleet, train, pre-check and govern the rest, report (embedded by default)."""
    if driver not in ("governor", "naive"):
        raise typer.BadParameter("must be 'governor' or 'naive'", param_hint="--driver")
    logging.basicConfig(level=logging.WARNING)
    settings = settings_from(config)
    fault_model = load_scenario(scenario)
    road = open_road(settings)
    if settings.uses_kafka:
        from retrylens.ingest.kafka_clients import (
            ensure_topics,  # kafka-python only when Kafka is configured
        )

        ensure_topics(settings)
    loop = driver == "governor" and learn_share > 0 and tasks >= 40
    first = range(0, int(tasks * learn_share) if loop else tasks)
    rest = range(first.stop, tasks)
    if start_at is None:
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=fault_model.span_hours)
    else:
        start = start_at if start_at.tzinfo else start_at.replace(tzinfo=UTC)
    emitter = build_emitter(settings, name="demo")
    before = road.run("store.stats")["events"]
    report: dict = {"mode": "kafka" if settings.uses_kafka else "embedded",
                    "store": settings.effective_dsn if settings.is_embedded_store else settings.clickhouse_dsn}
    with _progress(as_json) as progress:
        bar = progress.add_task("recording the fleet's first part", total=len(first))
        parts = [run_fleet(fault_model, tasks=tasks, seed=seed, driver=driver, emit=emitter.emit, start=start,
                           task_range=first, on_task=lambda _t: progress.advance(bar))]
        flushed = demo_loop.ingest(settings, road, emitter, expect=before + parts[0].events_emitted)
        if loop:
            progress.update(bar, description="training the risk model")
            report["model"] = demo_loop.train(road)
            log = demo_loop.PrecheckLog()
            bar = progress.add_task("pre-checking and governing the rest", total=len(rest))
            with demo_loop.api_preflights(settings, road, log, model_version=report["model"]["version"]) as preflight:
                parts.append(demo_loop.run_part(fault_model, tasks=tasks, seed=seed, part=rest, start=start,
                                                emit=emitter.emit, preflight=preflight,
                                                step=lambda _t: progress.advance(bar)))
            emitted = sum(p.events_emitted for p in parts)
            flushed = demo_loop.ingest(settings, road, emitter, expect=before + emitted) and flushed
            bar = progress.add_task("the same tasks without pre-checks (recorded nowhere)", total=len(rest))
            without = demo_loop.run_part(fault_model, tasks=tasks, seed=seed, part=rest, start=start,
                                         step=lambda _t: progress.advance(bar))
            report["prechecks"] = {**log.as_dict(), "changed": demo_loop.changed(parts[1], without)}
        emitter.close()
        stored = road.run("store.stats")["events"] - before
        whole = demo_loop.combined(parts)
        report.update({
            "events_emitted": whole["fleet"]["events_emitted"], "events_stored": stored, "flushed": flushed,
            # Events already in the store: its metrics count them too, the truth does not.
            "store_held_before": before,
            "fleet": whole["fleet"], "metrics": road.run("metrics"),
            # The ground truth of this run, from the simulation's own tallies; equal to "metrics"
            # field by field when the store held nothing before (p95s within the histogram's error).
            "truth": whole["truth"].as_dict(),
        })
        if loop:
            bar = progress.add_task("writing the policy report", total=None)
            report["policy_report"] = demo_loop.policy_report(
                road, fleet_policy(fault_model), seed=seed,
                progress=lambda message: progress.update(bar, description=f"policy report: {message}"))
            progress.update(bar, total=1, completed=1)
    report["dashboard"] = _dashboard_command(settings, config)
    if as_json:
        typer.echo(json.dumps(report, default=str))
        return
    _print_report(report)


@contextmanager
def _progress(quiet: bool) -> Iterator[Progress]:
    """Progress bars on stderr (nothing with --json: its stdout is one JSON object)."""
    console = Console(stderr=True, quiet=quiet)
    with progress_bars(console) as progress:
        yield progress


def _dashboard_command(settings: Settings, config: Path | None) -> str:
    """The one command that opens the dashboard on this run's data."""
    parts = [f"RETRYLENS_DATA_DIR={shlex.quote(str(settings.data_dir))}"]
    if settings.clickhouse_dsn:
        parts.append(f"RETRYLENS_CLICKHOUSE_DSN={shlex.quote(settings.clickhouse_dsn)}")
    if config is not None:
        parts.append(f"RETRYLENS_CONFIG={shlex.quote(str(config))}")
    return " ".join([*parts, *_this_cli(), "up"])


def _this_cli() -> list[str]:
    """The command that started this process (``.venv/bin/retrylens``, or ``python -m retrylens``),
    so the printed line works whether or not ``retrylens`` is on PATH."""
    script = Path(sys.argv[0])
    if script.name == "retrylens":
        return [shlex.quote(str(script))]
    return [shlex.quote(sys.executable), "-m", "retrylens"]


def _print_report(report: dict) -> None:
    fleet, metrics = report["fleet"], report["metrics"]
    earlier = report.get("store_held_before") or 0  # events of earlier runs already in the store
    out.print(
        f"[bold]RetryLens demo[/bold] ({report['mode']}, store {report['store']}): "
        f"{report['events_emitted']} events emitted, {report['events_stored']} stored"
        + (" (the others were already in the store: a rerun's events are deduplicated)"
           if earlier and report["events_stored"] < report["events_emitted"] else "")
    )
    table = Table(title=f"Fleet run ({fleet['driver']} policy {fleet['policy_id']} v{fleet['policy_version']})")
    table.add_column("fleet")
    table.add_column("value")
    for name in ("tasks", "success_rate", "attempts", "wasted_attempts", "duplicate_side_effects", "handoffs",
                 "loops", "tokens", "cost_usd"):
        table.add_row(name, str(fleet[name]))
    out.print(table)
    shown = Table(title="Metrics read back from the store, beside the simulation's ground truth", show_header=True)
    shown.add_column("metric")
    shown.add_column("store")
    shown.add_column("truth")
    for name in ("calls", "retries", "retry_rate", "retry_success_rate", "mean_retry_duration_ms",
                 "degradation_rate", "handoffs", "handoff_rate", "retry_cost_usd"):
        shown.add_row(name, _fmt(metrics.get(name)), _fmt(report["truth"].get(name)))
    out.print(shown)
    if earlier:
        out.print(f"[yellow]The store already held {earlier} events from earlier runs: the "
                  "store column counts them too, the truth only this run. For a comparison with the truth "
                  "alone, run with a fresh RETRYLENS_DATA_DIR.[/yellow]")
    if "model" in report:
        model = report["model"]
        source = "tasks in the store (this run's first part and earlier runs')" if earlier else "tasks of the first part"
        trained = model.get("trained") or model["version"]
        out.print(f"Risk model [bold]{trained}[/bold] trained on {model.get('n_train')} {source} "
                  f"(held-out ROC-AUC {_fmt(model.get('roc_auc'))}, Brier {_fmt(model.get('brier'))}).")
        if trained != model["version"]:
            out.print(f"[yellow]Kept as a candidate: {model.get('promotion')}. The pre-checks use "
                      f"{model['version']}.[/yellow]")
    if "prechecks" in report:
        checks = report["prechecks"]
        advice = ", ".join(f"{k} {v}" for k, v in checks["advice"].items()) or "no adjustments"
        out.print(f"Pre-checks through the API: {checks['checked']} tasks, mean risk {_fmt(checks['mean_risk'])}; "
                  f"advice: {advice}.")
        effect = Table(title="What the pre-checks changed (the same tasks, same faults)")
        effect.add_column("")
        effect.add_column("with pre-checks")
        effect.add_column("without")
        for name, pair in checks["changed"].items():
            effect.add_row(name, _fmt(pair["with_prechecks"]), _fmt(pair["without_prechecks"]))
        out.print(effect)
        if earlier:
            out.print(f"[yellow]The model and the pre-checks also learned from the {earlier} "
                      "events of earlier runs (a rerun of this seed: these very tasks' outcomes), so this is not "
                      "the seed's first-run comparison; a fresh RETRYLENS_DATA_DIR gives that.[/yellow]")
    if "policy_report" in report:
        rep = report["policy_report"]
        out.print("Policy report:")
        for line in rep["lines"]:
            out.print(f"  {line}", markup=False, highlight=False)
        out.print(f"  {rep['html']}")
    out.print(f"Open the dashboard on this data:\n  [bold]{report['dashboard']}[/bold]")


def _fmt(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
