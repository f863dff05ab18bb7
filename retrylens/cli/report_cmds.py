"""``retrylens report policies``: the live retry policy vs candidates, from the stored history.

Reads the configured store (in embedded mode the chDB store itself, or, while a
``retrylens serve`` owns it, through that server: :mod:`.road`), then writes
``policy_report.json`` and a self-contained ``policy_report.html``.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retrylens.errors import ConfigError, PolicyError
from retrylens.evaluation.candidates import (
    CandidateError,
    load_candidates,
    read_mapping,
)
from retrylens.sdk.core.policy import RetryPolicy, parse_policy, policy_from_env

from .common import ConfigOption, console, handle_errors, progress_bars, settings_from
from .road import open_road

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
    live: Path | None = typer.Option(None, "--live", help="Live policy file (default: the policy the history's "
                                     "events name, from the policy store; else RETRYLENS_POLICY_FILE, "
                                     "RETRYLENS_POLICY or the SDK defaults, with a warning)."),
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
    live_policy = _live_policy(live)  # without --live: validates the files; the report finds the logged policy
    try:
        chosen = load_candidates(files, live_policy)
    except CandidateError as exc:
        console.print(f"[red]bad candidate policy:[/red] {exc}")
        raise typer.Exit(2) from exc
    with progress_bars(console, counts=False) as bar:
        total = 6 + 2 * len(chosen)
        task = bar.add_task("opening the store", total=total)

        def step(message: str) -> None:
            bar.update(task, advance=1, description=message)

        settings = settings_from(config)
        road = open_road(settings)
        report = road.run(
            "report.policies", progress=step, live=live_policy.model_dump(mode="json") if live else None,
            fallback_live=live_policy.model_dump(mode="json"),
            candidates=[{"name": c.name, "policy": c.policy.model_dump(mode="json"), "source": c.source,
                         "changes": None if live else read_mapping(Path(c.source))} for c in chosen],
            project=project, agent=agent, hours=hours, replicates=replicates, seed=seed,
            min_success_gain=min_success_gain, min_cost_saving=min_cost_saving,
            out=str(out.resolve()) if out else None)
        bar.update(task, completed=total, description="done")
    for line in report["lines"]:
        console.print(line, markup=False, highlight=False)
    typer.echo(json.dumps({k: report[k] for k in ("json", "html", "evidence", "recommendation", "policy")}))
