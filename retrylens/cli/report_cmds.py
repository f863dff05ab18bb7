"""``retrylens report policies``: the live retry policy vs candidates, from the stored history.

Reads the configured store (in embedded mode this command opens the chDB store itself, so
no server may own it at the same time: a locked store gives the clear
:class:`~retrylens.errors.StoreLockedError` message), then writes ``policy_report.json``
and a self-contained ``policy_report.html``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from retrylens.errors import ConfigError, PolicyError
from retrylens.evaluation.candidates import (
    CandidateError,
    describe_changes,
    load_candidates,
    read_mapping,
)
from retrylens.sdk.policy import RetryPolicy, parse_policy, policy_from_env
from retrylens.store import open_store

from .common import ConfigOption, console, handle_errors, settings_from

report_app = typer.Typer(help="Reports: retry policies.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add this area's commands to ``app``."""
    app.add_typer(report_app, name="report")


def _live_policy(path: Path | None) -> RetryPolicy:
    try:
        if path is None:
            return policy_from_env()
        return parse_policy(read_mapping(path), source=str(path))
    except PolicyError as exc:
        field = f" (field '{exc.field}')" if exc.field else ""
        raise ConfigError(f"live policy{field}: {exc}") from exc
    except CandidateError as exc:
        raise ConfigError(str(exc).replace("candidate policy", "live policy")) from exc


def recommendation_lines(report: dict) -> list[str]:
    """The decision with the chosen candidate's changes, then each candidate: its changes and verdict."""
    rec = report["recommendation"]
    head = f"{rec['decision']}"
    if rec.get("policy"):
        head += f" -> {rec['policy']} ({describe_changes(rec.get('changes', []), limit=20)})"
    lines = [f"{head}: {rec['reason']}"]
    verdicts = {v["name"]: v for v in rec.get("candidates", [])}
    for c in report.get("candidates", []):
        v = verdicts.get(c["name"], {})
        lines.append(f"  candidate {c['name']}: {describe_changes(c.get('changes', []), limit=20)}"
                     + (f"; {v['verdict']}: {v['why']}" if v else ""))
    return lines


@report_app.command("policies")
@handle_errors
def policies(
    candidates: list[Path] = typer.Option(..., "--candidates", help="Candidate policy file (YAML/JSON); repeat, "
                                          "or list more files after the options."),
    more: list[Path] = typer.Argument(None, help="More candidate policy files.", show_default=False),
    out: Path | None = typer.Option(
        None, "--out", help="Directory for the HTML and JSON report (default: <data_dir>/reports/<UTC time>, "
        "where the dashboard's reports page finds it)."
    ),
    live: Path | None = typer.Option(None, "--live", help="Live policy file (default: RETRYLENS_POLICY_FILE, "
                                     "RETRYLENS_POLICY or the SDK defaults)."),
    project: str | None = typer.Option(None, "--project", help="Only this project."),
    agent: str | None = typer.Option(None, "--agent", help="Only this agent."),
    hours: float | None = typer.Option(None, "--hours", min=0.01, help="Only the last N hours."),
    replicates: int = typer.Option(400, "--replicates", min=50, max=10_000, help="Bootstrap replicates."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    min_success_gain: float = typer.Option(
        0.01, "--min-success-gain", min=0.0, max=0.99,
        help="Adopt a candidate for success only when the CI's lower bound of its gain is at least this "
        "(0.01 = 1 percentage point)."),
    min_cost_saving: float = typer.Option(
        0.05, "--min-cost-saving", min=0.0, max=0.99,
        help="Adopt a cheaper candidate only when its CI's bound saves at least this share of the live cost."),
    config: Path | None = ConfigOption,
) -> None:
    """Compare the live retry policy with candidates on the stored history (HTML + JSON)."""
    files = [*candidates, *(more or [])]
    live_policy = _live_policy(live)
    try:
        chosen = load_candidates(files, live_policy)
    except CandidateError as exc:
        console.print(f"[red]bad candidate policy:[/red] {exc}")
        raise typer.Exit(2) from exc
    since = datetime.now(UTC) - timedelta(hours=hours) if hours else None
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console,
                  transient=False) as bar:
        total = 6 + 2 * len(chosen)
        task = bar.add_task("opening the store", total=total)

        def step(message: str) -> None:
            bar.update(task, advance=1, description=message)

        # The replay's modules (pandas, numpy) load here, not for every command and --help.
        from retrylens.evaluation.history import build_history, read_frame
        from retrylens.evaluation.report import Margins, build_report, write_report
        from retrylens.evaluation.shadow import compare_shadow

        settings = settings_from(config)
        out = out or settings.data_dir / "reports" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        store = open_store(settings)
        step("reading the attempt history")
        history = build_history(read_frame(store, project=project, agent=agent, since=since))
        step("shadow comparison")
        shadow = compare_shadow(store, project=project, since=since)
        report = build_report(history, live_policy, chosen, shadow=shadow, replicates=replicates, seed=seed,
                              progress=step, margins=Margins(success=min_success_gain, cost_share=min_cost_saving))
        step("writing the report")
        json_path, html_path = write_report(report, out)
        bar.update(task, completed=total, description="done")
    rec = report["recommendation"]
    for line in recommendation_lines(report):
        console.print(line, markup=False, highlight=False)
    typer.echo(json.dumps({"json": str(json_path), "html": str(html_path), "evidence": report["evidence"],
                           "recommendation": rec["decision"], "policy": rec["policy"]}))
