"""The evaluation area's store operation: the policy report (see :mod:`retrylens.analytics.operations`).

``retrylens report policies`` and ``retrylens demo`` run it on their own store or, while a
server owns the store, on that server. Policies travel as plain mappings (the
:class:`~retrylens.sdk.policy.RetryPolicy` documents), parsed here as the CLI parsed them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from retrylens.analytics.operations import operation
from retrylens.config import Settings
from retrylens.sdk.policy import parse_policy
from retrylens.store import EventStore


@operation("report.policies")
def report_policies(
    store: EventStore, settings: Settings, *, live: dict[str, Any], candidates: list[dict[str, Any]],
    project: str | None = None, agent: str | None = None, hours: float | None = None, replicates: int = 400,
    seed: int = 0, out: str | None = None, progress: Callable[[str], None] | None = None,
    min_success_gain: float = 0.01, min_cost_saving: float = 0.05,
) -> dict[str, Any]:
    """Compare ``live`` with ``candidates`` (``[{"name", "policy", "source"}]``) on the stored history;
    writes the JSON and HTML report to ``out`` (default ``<data_dir>/reports/<UTC time>``)."""
    from .candidates import Candidate
    from .history import build_history, read_frame
    from .report import Margins, build_report, recommendation_lines, write_report
    from .shadow import compare_shadow

    step = progress or (lambda _message: None)
    live_policy = parse_policy(live, source="live policy")
    chosen = [Candidate(c["name"], parse_policy(c["policy"], source=c["source"]), c["source"]) for c in candidates]
    since = datetime.now(UTC) - timedelta(hours=hours) if hours else None
    folder = Path(out) if out else settings.data_dir / "reports" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    step("reading the attempt history")
    history = build_history(read_frame(store, project=project, agent=agent, since=since))
    step("shadow comparison")
    shadow = compare_shadow(store, project=project, since=since)
    report = build_report(history, live_policy, chosen, shadow=shadow, replicates=replicates, seed=seed,
                          progress=step, margins=Margins(success=min_success_gain, cost_share=min_cost_saving))
    step("writing the report")
    json_path, html_path = write_report(report, folder)
    rec = report["recommendation"]
    return {"json": str(json_path), "html": str(html_path), "evidence": report["evidence"],
            "recommendation": rec["decision"], "policy": rec["policy"], "reason": rec["reason"],
            "changes": rec.get("changes", []), "lines": recommendation_lines(report)}
