"""Commands of failure intelligence: metrics, groups, patterns, alerts, train, evaluate."""

from __future__ import annotations

import json
import logging
import signal
import threading
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import typer

from retrylens.analytics.failure_groups import failure_groups
from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import metrics_by, metrics_summary
from retrylens.analytics.patterns import failure_patterns
from retrylens.analytics.rollups import backfill_rollups
from retrylens.analytics.sealing import DEFAULT_GRACE, seal_rollups
from retrylens.analytics.traces import read_traces
from retrylens.errors import ConfigError
from retrylens.store import open_store

from .common import ConfigOption, console, handle_errors, settings_from

alerts_app = typer.Typer(help="Alert rules: add, list, evaluate, watch.", no_args_is_help=True)
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
    app.command("backfill-rollups")(backfill)
    app.add_typer(alerts_app, name="alerts")
    app.add_typer(rollups_app, name="rollups")


def _slice(project: str | None, agent: str | None, phase: str | None, error_type: str | None,
           policy_version: str | None, hours: float | None) -> Slice:
    start = datetime.now(UTC) - timedelta(hours=hours) if hours else None
    return Slice(project=project, agent=agent, phase=phase, error_type=error_type,
                 policy_version=policy_version, start=start)


def _alerting() -> Any:
    """The alerts module, imported when an alerts command runs: like the model's modules
    (scikit-learn), it is too heavy to load for every command, ``--help`` included."""
    from retrylens.analytics import alerts

    return alerts


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
    where = _slice(project, agent, phase, error_type, policy_version, hours)
    store = open_store(settings_from(config))
    source = "raw" if raw else "rollup"
    try:
        data: Any = (
            {s.value: s.metrics.as_dict() for s in metrics_by(store, by, where, source=source)} if by
            else metrics_summary(store, where, source=source).as_dict()
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
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
    project: str = typer.Option(..., "--project", help="Project whose failures to group."),
    config: Path | None = ConfigOption,
    noise: bool = typer.Option(False, "--noise", help="Include rate-limit and quota failures."),
    limit: int = typer.Option(20, min=1, max=1000), as_json: bool = JsonOption,
) -> None:
    """Failure groups: normalised error messages with counts, tasks and trend."""
    found = failure_groups(open_store(settings_from(config)), project, include_noise=noise, limit=limit)
    if as_json:
        _echo_json([{**asdict(g), "trend": g.trend} for g in found])
        return
    for g in found:
        typer.echo(f"{g.failures:6} failures {g.tasks:5} tasks  {g.trend:8} {g.error_type:16} {g.pattern}")


@handle_errors
def patterns(
    config: Path | None = ConfigOption, project: str | None = ProjectOption,
    phase: str | None = typer.Option(None, "--phase", help="Target: a failed attempt in this phase."),
    min_support: int = typer.Option(10, min=1), as_json: bool = JsonOption,
) -> None:
    """Input patterns most associated with failure, in plain words."""
    found = failure_patterns(open_store(settings_from(config)), Slice(project=project), phase=phase,
                             min_support=min_support)
    if as_json:
        _echo_json([asdict(p) for p in found])
        return
    for p in found:
        typer.echo(f"- {p.description}")


@handle_errors
def train(
    config: Path | None = ConfigOption,
    traces: Path | None = typer.Option(None, "--traces", help="Train from an agent-traces JSONL file instead of the store."),
    project: str | None = ProjectOption,
    in_memory_limit: int = typer.Option(200_000, min=1, help="Above this many tasks, train out-of-core."),
) -> None:
    """Train the failure classifier, save a new model version and make it current."""
    from retrylens.analytics.model_store import ModelStore, models_dir
    from retrylens.analytics.training import train_from_store, train_from_traces

    settings = settings_from(config)
    target = ModelStore(models_dir(settings))
    if traces is not None:
        result = train_from_traces(traces, model_store=target)
    else:
        try:
            result = train_from_store(open_store(settings), Slice(project=project),
                                      in_memory_limit=in_memory_limit, model_store=target)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    summary = {k: v for k, v in result.meta.items() if k not in {"features"}}
    for section in [summary.get("metrics", {}), *summary.get("baselines", {}).values()]:
        section.pop("calibration", None)
    _echo_json({"version": result.version, **summary})


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


def _seal(store: Any, grace_minutes: float) -> dict[str, Any]:
    report = seal_rollups(store, grace=timedelta(minutes=grace_minutes))
    return {"sealed": report.sealed, "resealed": report.resealed, "hours": report.hours,
            "days": report.days, "boundary": report.boundary.isoformat()}


@handle_errors
def backfill(config: Path | None = ConfigOption, grace_minutes: float = GraceOption) -> None:
    """Re-derive the rollups from stored events, then seal closed buckets (safe to repeat)."""
    store = open_store(settings_from(config))
    statements = backfill_rollups(store)
    _echo_json({"statements": statements, **_seal(store, grace_minutes)})


@rollups_app.command("seal")
@handle_errors
def rollups_seal(config: Path | None = ConfigOption, grace_minutes: float = GraceOption) -> None:
    """Seal closed 5-minute buckets into plain counters and re-seal those with late events."""
    _echo_json(_seal(open_store(settings_from(config)), grace_minutes))


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
    try:
        rule = _alerting().AlertRule(name=name, metric=metric, op=op, threshold=threshold,  # type: ignore[arg-type]
                                  window_minutes=window_minutes, per=per, min_calls=min_calls, webhook_url=webhook,
                                  where=Slice(project=project, agent=agent, phase=phase, policy_version=policy_version))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    _alerting().save_rule(open_store(settings_from(config)), rule)
    _echo_json({"rule_id": rule.rule_id, "name": rule.name})


@alerts_app.command("list")
@handle_errors
def alerts_list(config: Path | None = ConfigOption) -> None:
    """Rules and the state of each firing slice."""
    store = open_store(settings_from(config))
    _echo_json({"rules": [{**asdict(r), "where": asdict(r.where)} for r in _alerting().list_rules(store)],
                "states": _alerting().alert_states(store)})


@alerts_app.command("evaluate")
@handle_errors
def alerts_evaluate(
    config: Path | None = ConfigOption, webhook: str = typer.Option("", help="Default webhook URL."),
) -> None:
    """Evaluate every rule once; prints the notifications sent."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sent = _alerting().evaluate_alerts(open_store(settings_from(config)), webhook_url=webhook)
    _echo_json([n.payload() for n in sent])


@alerts_app.command("watch")
@handle_errors
def alerts_watch(
    config: Path | None = ConfigOption, interval: float = typer.Option(60.0, min=1.0),
    webhook: str = typer.Option("", help="Default webhook URL."),
) -> None:
    """Evaluate the rules every ``--interval`` seconds until SIGINT/SIGTERM."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    console.print(f"evaluating alert rules every {interval:g}s")
    _alerting().run_periodically(open_store(settings_from(config)), interval_s=interval, stop=stop, webhook_url=webhook)
