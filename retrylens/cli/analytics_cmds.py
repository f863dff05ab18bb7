"""Commands of failure intelligence: metrics, groups, patterns, alerts, train, evaluate.

Whatever reads or writes the store runs as a named operation (:mod:`.road`): on the store
itself, or on the ``retrylens serve`` that owns it, with the same output.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from retrylens.analytics.sealing import DEFAULT_GRACE
from retrylens.analytics.traces import read_traces
from retrylens.errors import ArgumentError, RetryLensError

from .common import ConfigOption, console, handle_errors, progress_bars, settings_from
from .road import store_operation
from .views import alerts_table, train_summary

alerts_app = typer.Typer(help="Alert rules: add, update, delete, list, evaluate, watch.", no_args_is_help=True)
rollups_app = typer.Typer(help="Rollup maintenance: seal closed buckets.", no_args_is_help=True)

ProjectOption = typer.Option(None, "--project", help="Only this project.")
AgentOption = typer.Option(None, "--agent", help="Only this agent.")
PhaseOption = typer.Option(None, "--phase", help="Only this phase.")
ErrorTypeOption = typer.Option(None, "--error-type", help="Only this error type.")
PolicyOption = typer.Option(None, "--policy-version", help="Only this policy version.")
HoursOption = typer.Option(None, "--hours", min=0.01, help="Only the last N hours.")
JsonOption = typer.Option(False, "--json", help="Print one JSON object.")


def register(app: typer.Typer) -> None:
    """Add this area's commands to ``app``."""
    app.command()(metrics)
    app.command()(groups)
    app.command()(patterns)
    app.command()(train)
    app.command()(evaluate)
    app.command("advice-effects")(advice_effects)
    app.command("backfill-rollups")(backfill)
    app.add_typer(alerts_app, name="alerts")
    app.add_typer(rollups_app, name="rollups")


def _echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, default=str))


@handle_errors
def metrics(
    config: Path | None = ConfigOption, project: str | None = ProjectOption, agent: str | None = AgentOption,
    phase: str | None = PhaseOption, error_type: str | None = ErrorTypeOption,
    policy_version: str | None = PolicyOption, hours: float | None = HoursOption,
    by: str | None = typer.Option(None, "--by", help="Slice by project, agent, phase, error_type or policy_version."),
    raw: bool = typer.Option(False, "--raw", help="Compute from raw events instead of the rollups."),
    as_json: bool = JsonOption,
) -> None:
    """Retry metrics (retry rate, retry success, degradation, hand-offs, recovery, cost)."""
    data: Any = store_operation(settings_from(config), "metrics", by=by, raw=raw, project=project, agent=agent,
                                phase=phase, error_type=error_type, policy_version=policy_version, hours=hours)
    if as_json:
        _echo_json(data)
        return
    rows = data.items() if by else [("all", data)]
    for name, values in rows:
        typer.echo(f"[{name}]")
        for key, value in values.items():
            shown = "—" if value is None else f"{value:.4g}" if isinstance(value, float) else value
            typer.echo(f"  {key:34} {shown}")


@handle_errors
def groups(
    project: str | None = typer.Option(None, "--project", help="Only this project (default: every project)."),
    config: Path | None = ConfigOption,
    noise: bool = typer.Option(False, "--noise", help="Include rate-limit and quota failures."),
    limit: int = typer.Option(20, min=1, max=1000), as_json: bool = JsonOption,
) -> None:
    """Failure groups: normalised error messages with counts, tasks and trend."""
    found = store_operation(settings_from(config), "groups", project=project, noise=noise, limit=limit)
    if as_json:
        _echo_json(found)
        return
    for g in found:
        where = "" if project else f"{g['project']:12} "
        typer.echo(f"{where}{g['failures']:6} failures {g['tasks']:5} tasks  {g['trend']:8} {g['error_type']:16} "
                   f"{g['pattern']}")


@handle_errors
def advice_effects(config: Path | None = ConfigOption, project: str | None = ProjectOption,
                   as_json: bool = JsonOption) -> None:
    """Each pre-check advice kind's measured effect (given vs withheld, 95 % CIs) and whether it is retired."""
    found = store_operation(settings_from(config), "advice.effects", project=project)
    if as_json:
        _echo_json(found)
        return
    if not found["effects"]:
        typer.echo("No advice given or withheld on pre-checks whose tasks ended yet.")
    for e in found["effects"]:
        state = "RETIRED" if e["advice"] in found["retired"] else e["verdict"]
        typer.echo(f"{e['advice']:20} {state:9} {e['words']}")


@handle_errors
def patterns(
    config: Path | None = ConfigOption, project: str | None = ProjectOption,
    phase: str | None = typer.Option(None, "--phase", help="Target: a failed attempt in this phase."),
    min_support: int = typer.Option(10, min=1), as_json: bool = JsonOption,
) -> None:
    """Input patterns most associated with failure, in plain words."""
    found = store_operation(settings_from(config), "patterns", project=project, phase=phase, min_support=min_support)
    if as_json:
        _echo_json(found)
        return
    for p in found:
        typer.echo(f"- {p['description']}")


@handle_errors
def train(
    config: Path | None = ConfigOption,
    traces: Path | None = typer.Option(None, "--traces", help="Train from an agent-traces JSONL file instead of the store."),
    project: str | None = ProjectOption,
    in_memory_limit: int = typer.Option(200_000, min=1, help="Above this many tasks, train out-of-core."),
    days: float | None = typer.Option(None, "--days", min=0.001, help="Train on the last N days only."),
    start: str | None = typer.Option(None, "--start", help="Window start (ISO time, inclusive)."),
    end: str | None = typer.Option(None, "--end", help="Window end (ISO time, exclusive)."),
    force: bool = typer.Option(False, "--force", help="Make the new model current even if worse than the current."),
    as_json: bool = JsonOption,
) -> None:
    """Train the failure classifier and save a new model version; from the store it becomes current
    only if no worse than the current model on the recent held-out tasks (both figures shown;
    ``--force`` overrides), else it is kept as a candidate."""
    settings = settings_from(config)
    with _working(f"training the risk model on {traces or 'the store'}", quiet=as_json):
        result = _train(settings, traces, project, in_memory_limit,
                        window={"days": days, "start": start, "end": end}, force=force)
    if as_json:
        _echo_json(result)
        return
    for line in train_summary(result):
        typer.echo(line)


def _train(settings: Any, traces: Path | None, project: str | None, in_memory_limit: int, *,
           window: dict[str, Any], force: bool) -> dict[str, Any]:
    if traces is None:
        return store_operation(settings, "train", project=project, in_memory_limit=in_memory_limit,
                               force=force, **window)
    ignored = [name for name, given in (("--project", project), ("--days", window.get("days")),
                                        ("--start", window.get("start")), ("--end", window.get("end")))
               if given is not None]
    if ignored:
        raise ArgumentError(f"{', '.join(ignored)} choose tasks of the store; a trace file is trained whole "
                            "(drop them, or train from the store without --traces)")
    from retrylens.analytics.model_store import ModelStore, models_dir
    from retrylens.analytics.training import train_from_traces

    result = train_from_traces(traces, model_store=ModelStore(models_dir(settings)), force=force)
    summary = {k: v for k, v in result.meta.items() if k not in {"features"}}
    for section in [summary.get("metrics", {}), *summary.get("baselines", {}).values()]:
        section.pop("calibration", None)
    return {"version": result.version, **summary}


@contextmanager
def _working(description: str, *, quiet: bool) -> Iterator[None]:
    """A live line on stderr with the time spent, while a long step runs (nothing with --json)."""
    with progress_bars(Console(stderr=True, quiet=quiet), counts=False) as progress:
        task = progress.add_task(description, total=None)
        yield
        progress.update(task, total=1, completed=1)


@handle_errors
def evaluate(
    traces: Path = typer.Option(..., "--traces", help="Agent-traces JSONL file to score."),
    config: Path | None = ConfigOption, as_json: bool = JsonOption,
) -> None:
    """Score a trace file with the current model: ROC-AUC, PR-AUC, Brier."""
    from retrylens.analytics.model_store import load_current_model
    from retrylens.analytics.training import evaluate_traces

    records = read_traces(traces)
    loaded = load_current_model(settings_from(config), check_interval_s=0)
    result = evaluate_traces(loaded.model, records)
    data = {"n": result.n, "positives": result.positives, "roc_auc": result.roc_auc, "pr_auc": result.pr_auc,
            "brier": result.brier, "model_version": loaded.version}
    if as_json:
        _echo_json(data)
        return
    for key, value in data.items():
        typer.echo(f"{key:14} {value}")


GraceOption = typer.Option(
    DEFAULT_GRACE.total_seconds() / 60, "--grace-minutes", min=0.0,
    help="Buckets that ended longer ago than this are sealed.",
)


@handle_errors
def backfill(config: Path | None = ConfigOption, grace_minutes: float = GraceOption) -> None:
    """Re-derive the rollups from stored events, then seal closed buckets (safe to repeat)."""
    _echo_json(store_operation(settings_from(config), "backfill", grace_minutes=grace_minutes))


@rollups_app.command("seal")
@handle_errors
def rollups_seal(config: Path | None = ConfigOption, grace_minutes: float = GraceOption) -> None:
    """Seal closed 5-minute buckets into plain counters and re-seal those with late events."""
    _echo_json(store_operation(settings_from(config), "rollups.seal", grace_minutes=grace_minutes))


@alerts_app.command("add")
@handle_errors
def alerts_add(
    name: str = typer.Option(..., help="Rule name."), metric: str = typer.Option(..., help="Metric to watch."),
    op: str = typer.Option(">", help="One of >, >=, <, <=."), threshold: float = typer.Option(...),
    window_minutes: int = typer.Option(15, min=1), per: str = typer.Option("", help="Evaluate per this dimension."),
    min_calls: int = typer.Option(0, min=0), webhook: str = typer.Option("", help="Webhook URL."),
    config: Path | None = ConfigOption, project: str | None = ProjectOption, agent: str | None = AgentOption,
    phase: str | None = PhaseOption, policy_version: str | None = PolicyOption,
) -> None:
    """Add an alert rule."""
    _echo_json(store_operation(settings_from(config), "alerts.add", name=name, metric=metric, op=op,
                               threshold=threshold, window_minutes=window_minutes, per=per, min_calls=min_calls,
                               webhook=webhook, project=project, agent=agent, phase=phase,
                               policy_version=policy_version))


@alerts_app.command("update")
@handle_errors
def alerts_update(
    rule_id: str = typer.Argument(..., help="The rule's id (see `retrylens alerts list`)."),
    name: str | None = typer.Option(None, help="New name."), metric: str | None = typer.Option(None),
    op: str | None = typer.Option(None), threshold: float | None = typer.Option(None),
    window_minutes: int | None = typer.Option(None, min=1), per: str | None = typer.Option(None),
    min_calls: int | None = typer.Option(None, min=0), webhook: str | None = typer.Option(None),
    enabled: bool | None = typer.Option(None, "--enabled/--disabled", help="Switch the rule on or off."),
    config: Path | None = ConfigOption, project: str | None = ProjectOption, agent: str | None = AgentOption,
    phase: str | None = PhaseOption, policy_version: str | None = PolicyOption,
) -> None:
    """Change an alert rule: only the options given change."""
    _echo_json(store_operation(settings_from(config), "alerts.update", rule_id=rule_id, name=name, metric=metric,
                               op=op, threshold=threshold, window_minutes=window_minutes, per=per,
                               min_calls=min_calls, webhook=webhook, enabled=enabled, project=project, agent=agent,
                               phase=phase, policy_version=policy_version))


@alerts_app.command("delete")
@handle_errors
def alerts_delete(
    rule_id: str = typer.Argument(..., help="The rule's id (see `retrylens alerts list`)."),
    config: Path | None = ConfigOption,
) -> None:
    """Delete an alert rule."""
    _echo_json(store_operation(settings_from(config), "alerts.delete", rule_id=rule_id))


@alerts_app.command("list")
@handle_errors
def alerts_list(config: Path | None = ConfigOption, as_json: bool = JsonOption) -> None:
    """Rules and the state of each firing slice."""
    data = store_operation(settings_from(config), "alerts.list")
    if as_json:
        _echo_json(data)
        return
    Console(soft_wrap=False).print(alerts_table(data))


@alerts_app.command("evaluate")
@handle_errors
def alerts_evaluate(
    config: Path | None = ConfigOption, webhook: str = typer.Option("", help="Default webhook URL."),
) -> None:
    """Evaluate every rule once; prints the notifications sent."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _echo_json(store_operation(settings_from(config), "alerts.evaluate", webhook=webhook))


@alerts_app.command("watch")
@handle_errors
def alerts_watch(
    config: Path | None = ConfigOption, interval: float = typer.Option(60.0, min=1.0),
    webhook: str = typer.Option("", help="Default webhook URL."),
) -> None:
    """Evaluate the rules every ``--interval`` seconds until SIGINT/SIGTERM (here or on the store's server)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    console.print(f"evaluating alert rules every {interval:g}s")
    settings = settings_from(config)
    while not stop.is_set():
        try:
            for sent in store_operation(settings, "alerts.evaluate", webhook=webhook):
                console.print(f"alert {sent['status']}: {sent['message']}")
        except RetryLensError as exc:
            console.print(f"[red]alert evaluation failed:[/red] {exc}")
        stop.wait(interval)
