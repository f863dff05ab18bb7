"""A store whose every operator-visible word is hostile: Markdown images and links to a listener,
raw HTML and ``<script>``, backticks, emphasis, Streamlit's ``:red[…]`` and ``$math$``.

Every value carries a marker (``zq<n>``) so a test can find where it was shown and check that
it was shown as the characters it has. ``base`` is the URL of the listener the images and
links point at (the browser test's own; any unreachable URL for AppTest runs).

Also runnable as a script (the browser test seeds in a child process: chDB allows one process
per data directory): ``python hostile_seed.py DATA_DIR BASE_URL``.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from retrylens.analytics import alerts as alerting
from retrylens.analytics.filters import Slice
from retrylens.ingest.processor import SourceRef, ValidEvent, process
from retrylens.schemas import RetryEvent
from retrylens.store import EventStore

#: marker → the text around it that must be shown as written wherever the marker is shown
#: (Markdown would turn each into an image, link, code span, emphasis, heading or HTML).
WITNESS = {"zq1": "![zq1](", "zq2": "`zq2`", "zq3": "[zq3](", "zq4": "<script>window.zq4", "zq5": "![zq5](",
           "zq6": "![zq6](", "zq7": "**zq7**", "zq8": "[zq8](", "zq9": "# zq9", "zq10": "~~zq10~~",
           "zq11": "`zq11`", "zq12": "<i>zq12</i>", "zq13": "<b>zq13</b>", "zq14": "![zq14](",
           "zq15": "![zq15](", "zq16": "![zq16](", "zq17": "![zq17](", "zq18": "[zq18](", "zq19": "![zq19]("}
#: A second, well-behaved project: so the pages offer "All projects" and show both together.
CALM = "calm"
TASK_ATTEMPTS = 3


def hostile(base: str) -> dict[str, str]:
    """Field → hostile value (each within its schema limit, each with its own marker)."""
    return {
        # no "/" in the two that name API paths: the server's router splits a %2F (a 404 on any road)
        "project": "p![zq1](p.png) <b>`x`",
        "agent": "a`zq2` <b>x</b> *em*",
        "task_id": "t[zq3](javascript:alert(1)) <i>x",
        "phase": "<script>window.zq4=1</script>",
        "dependency": f"d![zq5]({base}/d.png)",
        "error_message": (f"boom ![zq6]({base}/m.png) [docs]({base}/docs) <img src=\"{base}/i.png\"> "
                          f"<script>window.zq6=1</script> `tick` :red[zq6] $zq6$ :smile: www.example.com"),
        "error_code": "**zq7** <i>i</i>",
        "decision_reason": f"because [zq8]({base}/r) <script>window.zq8=1</script> _em_",
        "handoff_reason": f"# zq9 ![h]({base}/h.png)",
        "summary": f"done ~~zq10~~ <a href=\"{base}/s\">s</a>",
        "policy_id": "pol`zq11`",
        "policy_version": "v<i>zq12</i>",
        "tool": "<b>zq13</b>",
        "idempotency_key": f"k![zq14]({base}/k.png)",
        "handoff_part": f"![zq15]({base}/role.png)",
        "rule": f"rule ![zq16]({base}/rule.png) `x`",
        "candidate": f"cand![zq17]({base}/c.png)",
        "report_reason": f"[zq18]({base}/why) <script>window.zq18=1</script>",
        "limitation": f"![zq19]({base}/l.png) <iframe src=\"{base}/f\"></iframe>",
    }


def _events(h: dict[str, str], project: str, start: datetime) -> list[RetryEvent]:
    task = h["task_id"]
    common: dict[str, Any] = {"project": project, "agent": {"name": h["agent"], "role": "r"}, "task_id": task,
                              "phase": h["phase"], "dependency": h["dependency"], "policy_id": h["policy_id"],
                              "policy_version": h["policy_version"]}
    events = [RetryEvent(**common, correlation_id=f"{task}/task", kind="task_started", ts=start)]
    at = start
    for attempt in range(1, TASK_ATTEMPTS + 1):
        corr = f"{task}/{attempt}"
        last = attempt == TASK_ATTEMPTS
        events += [
            RetryEvent(**common, correlation_id=corr, attempt=attempt, kind="attempt_started", ts=at),
            RetryEvent(**common, correlation_id=corr, attempt=attempt, kind="attempt_failed",
                       ts=at + timedelta(milliseconds=900), error_type="timeout", retryable=True, latency_ms=900,
                       error_detail={"message": h["error_message"], "code": h["error_code"]},
                       side_effects=[{"tool": h["tool"], "idempotency_key": h["idempotency_key"],
                                      "status": "committed"}],
                       context_snapshot={"message_count": 2, "last_messages": [
                           {"role": "user", "content": h["error_message"]}]}),
            RetryEvent(**common, correlation_id=corr, attempt=attempt, kind="decision",
                       ts=at + timedelta(milliseconds=901),
                       decision="handoff_human" if last else "retry_backoff",
                       decision_reason=h["handoff_reason"] if last else h["decision_reason"],
                       backoff_ms=0 if last else 150),
        ]
        at += timedelta(milliseconds=1051)
    handoff_parts = [{"role": "handoff:input", "content": h["error_message"]},
                     {"role": f"handoff:{h['handoff_part']}", "content": h["decision_reason"]}]
    events += [
        RetryEvent(**common, correlation_id=f"{task}/task", kind="handoff", ts=at, decision="handoff_human",
                   decision_reason=h["handoff_reason"],
                   context_snapshot={"message_count": 2, "last_messages": handoff_parts}),
        RetryEvent(**common, correlation_id=f"{task}/task", kind="task_finished", ts=at + timedelta(milliseconds=1),
                   outcome="handed_off", decision_reason=h["summary"]),
    ]
    return events


def seed_hostile(store: EventStore, base: str, reports_dir: Path, *, now: datetime | None = None) -> dict[str, str]:
    """Store the hostile task (and a calm one), a firing rule with a hostile name and a hostile
    policy report; returns :func:`hostile`'s values."""
    h = hostile(base)
    now = now or datetime.now(UTC)
    start = now - timedelta(minutes=30)
    calm = {**{k: f"calm-{k}" for k in h}, "task_id": "calm-task", "agent": "calm-agent"}
    events = _events(h, h["project"], start) + _events(calm, CALM, start)
    rows = []
    for offset, event in enumerate(events):
        result = process(event.to_json_bytes(), SourceRef("hostile-seed", 0, offset))
        assert isinstance(result, ValidEvent), result
        rows.append(result.row)
    store.insert_rows(rows)
    alerting.save_rule(store, alerting.AlertRule(name=h["rule"], metric="retry_rate", op=">", threshold=0.1,
                                                 window_minutes=24 * 60, where=Slice(project=h["project"])))
    alerting.evaluate_alerts(store, now=now)
    write_report(h, reports_dir / "hostile")
    return h


def write_report(h: dict[str, str], folder: Path) -> None:
    """A policy report (the shape ``report policies`` writes) whose names and reasons are hostile."""
    estimate = {"value": 0.8, "lo": 0.7, "hi": 0.9}
    change = [{"field": "caps", "live": h["candidate"], "candidate": h["report_reason"]}]
    report = {
        "recommendation": {"decision": "adopt_candidate", "policy": h["candidate"], "changes": change,
                           "reason": h["report_reason"],
                           "candidates": [{"name": h["candidate"], "verdict": "better", "why": h["report_reason"]}]},
        "candidates": [{"name": h["candidate"], "changes": change}],
        "metrics": ["success"],
        "policies": [{"name": "live", "estimates": {"success": estimate}},
                     {"name": h["candidate"], "estimates": {"success": estimate},
                      "diff_vs_live": {"success": {"value": 0.01, "lo": 0.0, "hi": 0.02}}}],
        "shadow": {"decisions": 3, "agreement": 0.5,
                   "matrix": [{"live": h["candidate"], "candidate": h["report_reason"], "n": 3}]},
        "history": {"source": h["limitation"]},
        "limitations": [h["limitation"]],
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(report))


def main(data_dir: str, base: str) -> None:
    from retrylens.config import load_settings
    from retrylens.store import open_store

    settings = load_settings(data_dir=Path(data_dir), clickhouse_dsn="", kafka_bootstrap_servers="")
    print(json.dumps(seed_hostile(open_store(settings), base, settings.data_dir / "reports")))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
