"""What the command line asks of a store, by name: one function per operation, two roads.

Each operation takes the store, the settings and plain keyword parameters and returns plain
JSON data. The CLI runs it on the store it opened itself, or, when a ``retrylens serve``
owns the embedded store (chDB lets one process open it), asks that server to run the same
function (``POST /v1/ops/{name}``, :mod:`retrylens.api.operations`). Both roads pass the
result through :func:`run`, which returns it as JSON would carry it, so the command prints
the same output whichever road answered.

Bad parameters raise :class:`ValueError` (or :class:`TypeError` for an unknown one) with a
message meant for the user.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from inspect import signature
from typing import Any

from retrylens.config import Settings
from retrylens.store import EventStore

from .filters import Slice

Operation = Callable[..., Any]
OPERATIONS: dict[str, Operation] = {}


def operation(name: str) -> Callable[[Operation], Operation]:
    def register(func: Operation) -> Operation:
        OPERATIONS[name] = func
        return func

    return register


def run(name: str, store: EventStore, settings: Settings, params: dict[str, Any], *,
        progress: Callable[[str], None] | None = None) -> Any:
    """Run operation ``name``; its result as JSON carries it (datetimes as text, tuples as lists).

    ``progress`` reaches the operations that report steps (those taking a ``progress`` argument)."""
    func = OPERATIONS.get(name)
    if func is None:
        raise LookupError(f"unknown operation {name!r}; known: {', '.join(sorted(OPERATIONS))}")
    extra = {"progress": progress} if progress is not None and "progress" in signature(func).parameters else {}
    return json.loads(json.dumps(func(store, settings, **params, **extra), default=str))


def _slice(project: str | None = None, agent: str | None = None, phase: str | None = None,
           error_type: str | None = None, policy_version: str | None = None, hours: float | None = None) -> Slice:
    start = datetime.now(UTC) - timedelta(hours=hours) if hours else None
    return Slice(project=project, agent=agent, phase=phase, error_type=error_type,
                 policy_version=policy_version, start=start)


@operation("metrics")
def metrics(store: EventStore, _settings: Settings, *, by: str | None = None, raw: bool = False,
            **where: Any) -> Any:
    from .metrics import metrics_by, metrics_summary

    source = "raw" if raw else "rollup"
    sliced = _slice(**where)
    if by:
        return {s.value: s.metrics.as_dict() for s in metrics_by(store, by, sliced, source=source)}
    return metrics_summary(store, sliced, source=source).as_dict()


@operation("groups")
def groups(store: EventStore, _settings: Settings, *, project: str | None = None, noise: bool = False,
           limit: int = 20) -> Any:
    from .failure_groups import failure_groups

    return [{**asdict(g), "trend": g.trend} for g in failure_groups(store, project, include_noise=noise, limit=limit)]


@operation("patterns")
def patterns(store: EventStore, _settings: Settings, *, project: str | None = None, phase: str | None = None,
             min_support: int = 10) -> Any:
    from .patterns import failure_patterns

    return [asdict(p) for p in failure_patterns(store, Slice(project=project), phase=phase, min_support=min_support)]


@operation("tasks")
def tasks(store: EventStore, _settings: Settings, *, outcome: str | None = None, only_retried: bool = False,
          limit: int = 20, **where: Any) -> Any:
    """Recent tasks, newest first, with the usual filters (:mod:`.task_list`)."""
    from .task_list import recent_tasks

    return recent_tasks(store, _slice(**where), outcome=outcome, only_retried=only_retried, limit=limit)


@operation("train")
def train(store: EventStore, settings: Settings, *, project: str | None = None,
          in_memory_limit: int = 200_000, days: float | None = None, start: str | None = None,
          end: str | None = None, force: bool = False) -> Any:
    """Train on the tasks of a time window (the last ``days``, or ``start``/``end`` ISO times; all
    when none); the model becomes current only if no worse than the one in force (``force``)."""
    from .model_store import ModelStore, models_dir
    from .training import train_from_store

    window_start = datetime.fromisoformat(start) if start else (
        datetime.now(UTC) - timedelta(days=days) if days else None)
    where = Slice(project=project, start=window_start, end=datetime.fromisoformat(end) if end else None)
    result = train_from_store(store, where, in_memory_limit=in_memory_limit,
                              model_store=ModelStore(models_dir(settings)), force=force)
    summary = {k: v for k, v in result.meta.items() if k != "features"}
    for section in [summary.get("metrics", {}), *summary.get("baselines", {}).values()]:
        section.pop("calibration", None)
    return {"version": result.version, **summary}


def _seal(store: EventStore, grace_minutes: float) -> dict[str, Any]:
    from .sealing import seal_rollups

    report = seal_rollups(store, grace=timedelta(minutes=grace_minutes))
    return {"sealed": report.sealed, "resealed": report.resealed, "hours": report.hours,
            "days": report.days, "boundary": report.boundary.isoformat()}


@operation("rollups.seal")
def rollups_seal(store: EventStore, _settings: Settings, *, grace_minutes: float) -> Any:
    return _seal(store, grace_minutes)


@operation("backfill")
def backfill(store: EventStore, _settings: Settings, *, grace_minutes: float) -> Any:
    from .rollups import backfill_rollups

    statements = backfill_rollups(store)
    return {"statements": statements, **_seal(store, grace_minutes)}


@operation("store.stats")
def store_stats(store: EventStore, _settings: Settings) -> Any:
    return {"events": store.count_distinct_events(), "rows": store.count_rows()}


@operation("store.migrate")
def store_migrate(store: EventStore, settings: Settings) -> Any:
    from retrylens.store.migrator import Migrator, context_from

    applied = Migrator(store.client, context_from(settings)).apply()
    return {"applied": [f"{m.version:04d}_{m.name}" for m in applied]}


# --- alert rules ------------------------------------------------------------------------

_WHERE_FIELDS = ("project", "agent", "phase", "error_type", "policy_version")


def rule_as_dict(rule: Any) -> dict[str, Any]:
    """An :class:`~.alerts.AlertRule` as plain data (its slice under ``where``)."""
    return {**asdict(rule), "where": asdict(rule.where)}


@operation("alerts.add")
def alerts_add(store: EventStore, settings: Settings, *, name: str, metric: str, threshold: float, op: str = ">",
               window_minutes: int = 15, per: str = "", min_calls: int = 0, webhook: str = "",
               **where: str | None) -> Any:
    from . import alerts

    rule = alerts.AlertRule(name=name, metric=metric, op=op, threshold=threshold,  # type: ignore[arg-type]
                            window_minutes=window_minutes, per=per, min_calls=min_calls, webhook_url=webhook,
                            where=Slice(**{k: where.get(k) for k in _WHERE_FIELDS}))
    _check_webhook(rule.webhook_url, settings)
    alerts.check_rule_cap(store, rule.where.project, settings.alert_rules_per_project)
    alerts.save_rule(store, rule)
    return {"rule_id": rule.rule_id, "name": rule.name}


def _check_webhook(url: str, settings: Settings) -> None:
    """Refuse at once a rule webhook that every post would refuse (see ``webhook_targets``).

    The message names the command line's ``--webhook``: operations run for the CLI alone."""
    from .webhook_targets import webhook_refusal

    reason = webhook_refusal(url, settings.alert_webhook_hosts, field="--webhook") if url else None
    if reason:
        raise ValueError(reason)


@operation("alerts.list")
def alerts_list(store: EventStore, _settings: Settings) -> Any:
    from . import alerts

    rules = alerts.list_rules(store)
    ids = {r.rule_id for r in rules}  # a deleted rule's last states are history, not state
    return {"rules": [rule_as_dict(r) for r in rules],
            "states": [s for s in alerts.alert_states(store) if s["rule_id"] in ids]}


@operation("alerts.update")
def alerts_update(store: EventStore, settings: Settings, *, rule_id: str, **changes: Any) -> Any:
    """Change the given fields of a rule (``webhook`` is its URL; slice fields by name)."""
    from . import alerts

    rule = alerts.get_rule(store, rule_id)
    if rule is None:
        raise ValueError(f"no alert rule {rule_id!r}")
    fields = {("webhook_url" if k == "webhook" else k): v for k, v in changes.items()
              if v is not None and k not in _WHERE_FIELDS}
    where = {k: changes[k] for k in _WHERE_FIELDS if changes.get(k) is not None}
    unknown = set(fields) - {"name", "metric", "op", "threshold", "window_minutes", "per", "min_calls",
                             "webhook_url", "enabled"}
    if unknown:
        raise TypeError(f"unknown field(s) {sorted(unknown)}")
    changed = replace(rule, **fields, where=rule.where.with_(**where))
    if "webhook_url" in fields:
        _check_webhook(changed.webhook_url, settings)
    alerts.save_rule(store, changed)
    return rule_as_dict(changed)


@operation("alerts.delete")
def alerts_delete(store: EventStore, _settings: Settings, *, rule_id: str) -> Any:
    from . import alerts

    rule = alerts.get_rule(store, rule_id)
    if rule is None:
        raise ValueError(f"no alert rule {rule_id!r}")
    alerts.delete_rule(store, rule)
    return {"deleted": rule_id, "name": rule.name}


@operation("alerts.evaluate")
def alerts_evaluate(store: EventStore, settings: Settings, *, webhook: str = "") -> Any:
    """Evaluate once and try the due pages once, here; what is not acknowledged stays queued in
    the outbox for the server's dispatcher (or the next evaluation) to retry."""
    from . import alerts
    from .alert_delivery import Dispatcher
    from .alert_outbox import Outbox

    outbox = Outbox.in_data_dir(settings.data_dir)
    try:
        sent = alerts.evaluate_alerts(store, webhook_url=webhook or settings.alert_webhook_url, outbox=outbox,
                                      dashboard_url=settings.dashboard_url)
        Dispatcher(outbox, allowed_hosts=settings.alert_webhook_hosts,
                   timeout_s=settings.alert_delivery_timeout_s).run_once()
    finally:
        outbox.close()
    return [n.payload() for n in sent]


@operation("advice.effects")
def advice_effects(store: EventStore, _settings: Settings, *, project: str | None = None) -> Any:
    """Each advice kind's measured effect (given vs withheld) and the kinds that retire for it."""
    from . import advice_effects as effects

    measured = effects.advice_effects(store, project=project)
    return {"effects": measured, "retired": effects.retired(measured)}
