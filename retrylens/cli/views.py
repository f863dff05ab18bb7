"""How the commands show their results to a person: tables and short summaries (``--json`` for machines).

Each function takes the plain data an operation returned (the same on both roads,
:mod:`.road`) and returns a rich renderable or lines, so the output is testable as text.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from retrylens.analytics.alert_delivery import safe_url


def _number(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def alerts_table(data: dict[str, Any]) -> Table | str:
    """Rules with their scope, condition, receiver and what is firing now."""
    if not data["rules"]:
        return "No alert rules. Add one with `retrylens alerts add` (or on the dashboard's alerts page)."
    firing: dict[str, list[str]] = {}
    for state in data.get("states", []):
        if state["status"] == "firing":
            firing.setdefault(state["rule_id"], []).append(state["slice_value"] or "all")
    table = Table(title="Alert rules", title_justify="left")
    for column in ("id", "name", "scope", "condition", "receiver", "state"):
        table.add_column(column, overflow="fold")
    for rule in data["rules"]:
        where = {k: v for k, v in rule["where"].items() if v is not None and k not in ("start", "end", "projects")}
        scope = ", ".join(f"{k}={v}" for k, v in where.items()) or "all projects"
        condition = f"{rule['metric']} {rule['op']} {rule['threshold']:g} over {rule['window_minutes']} min"
        if rule["per"]:
            condition += f", per {rule['per']}"
        if rule["min_calls"]:
            condition += f", ≥ {rule['min_calls']} calls"
        receiver = safe_url(rule["webhook_url"]) if rule["webhook_url"] else "default webhook / log"
        slices = firing.get(rule["rule_id"], [])
        state = "disabled" if not rule["enabled"] else f"FIRING ({', '.join(slices)})" if slices else "ok"
        table.add_row(rule["rule_id"], rule["name"], scope, condition, receiver, state)
    return table


def tasks_table(rows: list[dict[str, Any]]) -> Table | str:
    """Recent tasks, newest first, with what they came to."""
    if not rows:
        return "No tasks match."
    table = Table(title=f"{len(rows)} most recent tasks", title_justify="left")
    for column, justify in (("project", "left"), ("task", "left"), ("agent", "left"), ("last seen (UTC)", "left"),
                            ("attempts", "right"), ("failed", "right"), ("cost $", "right"), ("outcome", "left")):
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for r in rows:
        table.add_row(r["project"], r["task_id"], r["agent"], str(r["last_seen"])[:19].replace("T", " "),
                      str(r["attempts"]), str(r["failures"]), f"{float(r['cost_usd']):.4f}", r["outcome"] or "open")
    return table


def train_summary(result: dict[str, Any]) -> list[str]:
    """A trained model in a few lines: version, data, held-out scores against the baselines."""
    lines = [f"Trained risk model {result.get('version') or '(not saved)'}"
             + (f" from {result['source']}" if result.get("source") else "")]
    counts = [f"{result[k]} {label}" for k, label in (("n_train", "training examples"), ("n_test", "held out"))
              if result.get(k) is not None]
    if counts:
        lines.append("  " + ", ".join(counts))
    scores = result.get("metrics") or {}
    shown = [f"{name} {_number(scores.get(name))}" for name in ("roc_auc", "pr_auc", "brier") if name in scores]
    if shown:
        lines.append("  held-out: " + ", ".join(shown))
    for name, base in (result.get("baselines") or {}).items():
        if isinstance(base, dict) and "roc_auc" in base:
            lines.append(f"  baseline {name}: roc_auc {_number(base.get('roc_auc'))}, brier {_number(base.get('brier'))}")
    promotion = result.get("promotion")
    if isinstance(promotion, dict):
        state = "now current" if promotion.get("promoted") else "kept as a candidate"
        lines.append(f"  {state}: {promotion.get('reason', '')}")
    lines.append("  (full details: --json)")
    return lines
