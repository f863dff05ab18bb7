"""The evaluation area's store operation: the policy report (see :mod:`retrylens.analytics.operations`).

``retrylens report policies`` and ``retrylens demo`` run it on their own store or, while a
server owns the store, on that server. Policies travel as plain mappings (the
:class:`~retrylens.sdk.core.policy.RetryPolicy` documents), parsed here as the CLI parsed them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from retrylens.analytics.operations import operation
from retrylens.config import Settings
from retrylens.sdk.core.policy import parse_policy
from retrylens.store import EventStore


def policy_report(
    store: EventStore, *, live: dict[str, Any] | None, candidates: list[dict[str, Any]],
    project: str | None = None, agent: str | None = None, hours: float | None = None, replicates: int = 400,
    seed: int = 0, progress: Callable[[str], None] | None = None, min_success_gain: float = 0.01,
    min_cost_saving: float = 0.05, fallback_live: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The report dict (:func:`~.report.build_report`) of ``candidates`` on the stored history
    of ``project`` (and ``agent``, the last ``hours``); nothing is written.

    ``live``: the policy given (``--live``); ``None`` compares against the policy the events
    name, read from the policy store, else ``fallback_live`` (with a warning in the report).
    A candidate is ``{"name", "policy", "source"}``, plus ``"changes"`` (a mapping of changed
    fields) when its changes are to be merged into that resolved live policy. Raises
    :class:`~retrylens.errors.PolicyError` naming the field of a policy that does not validate.
    """
    from .baseline import resolve_baseline, stored_policies
    from .candidates import Candidate, overlay
    from .history import build_history, read_frame
    from .report import Margins, build_report
    from .shadow import compare_shadow

    step = progress or (lambda _message: None)
    since = datetime.now(UTC) - timedelta(hours=hours) if hours else None
    step("reading the attempt history")
    history = build_history(read_frame(store, project=project, agent=agent, since=since))
    given = parse_policy(live, source="live policy") if live is not None else None
    fallback = parse_policy(fallback_live or {}, source="live policy")
    baseline = resolve_baseline(history, given=given, fallback=fallback,
                                stored=[] if given is not None else stored_policies(store, project))
    live_policy = baseline.policy
    chosen = [Candidate(c["name"], (overlay(live_policy, c["changes"], source=c["source"])
                                    .model_copy(update={"id": c["name"]}) if c.get("changes") is not None
                                    else parse_policy(c["policy"], source=c["source"])), c["source"])
              for c in candidates]
    step("shadow comparison")
    shadow = compare_shadow(store, project=project, since=since)
    return build_report(history, live_policy, chosen, shadow=shadow, replicates=replicates, seed=seed,
                        progress=step, margins=Margins(success=min_success_gain, cost_share=min_cost_saving),
                        baseline=baseline)


@operation("report.policies")
def report_policies(
    store: EventStore, settings: Settings, *, live: dict[str, Any] | None, candidates: list[dict[str, Any]],
    project: str | None = None, agent: str | None = None, hours: float | None = None, replicates: int = 400,
    seed: int = 0, out: str | None = None, progress: Callable[[str], None] | None = None,
    min_success_gain: float = 0.01, min_cost_saving: float = 0.05, fallback_live: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`policy_report`, written as JSON and HTML to ``out`` (default
    ``<data_dir>/reports/<UTC time>``, where the dashboard's reports page finds it)."""
    from .report import recommendation_lines, write_report

    step = progress or (lambda _message: None)
    folder = Path(out) if out else settings.data_dir / "reports" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report = policy_report(store, live=live, candidates=candidates, project=project, agent=agent, hours=hours,
                           replicates=replicates, seed=seed, progress=step, min_success_gain=min_success_gain,
                           min_cost_saving=min_cost_saving, fallback_live=fallback_live)
    step("writing the report")
    json_path, html_path = write_report(report, folder)
    rec = report["recommendation"]
    return {"json": str(json_path), "html": str(html_path), "evidence": report["evidence"],
            "recommendation": rec["decision"], "policy": rec["policy"], "reason": rec["reason"],
            "changes": rec.get("changes", []), "lines": recommendation_lines(report),
            "baseline": report["baseline"], "candidates": rec.get("candidates", [])}
