"""Alert rules of a project: create, change and delete them over the API.

- ``POST /v1/projects/{project}/alerts/rules`` — a new rule (201), watching the project;
- ``PUT /v1/projects/{project}/alerts/rules/{rule_id}`` — replace a rule's settings;
- ``DELETE /v1/projects/{project}/alerts/rules/{rule_id}`` — delete it.

The rule's slice is always the path's project, which the key must be allowed to read (as
every project route, :mod:`.auth`); a rule of another project answers 404 like one that
does not exist. ``GET /v1/projects/{project}/alerts`` (:mod:`.reads`) lists the rules with
their states. The server evaluates rules every ``maintenance_interval_s`` and posts each
firing or resolution to the rule's webhook (else ``alert_webhook_url``), retried until
acknowledged (:mod:`retrylens.analytics.alert_delivery`). Deleting or disabling a firing
rule sends its resolution at the next evaluation. A project has at most
``alert_rules_per_project`` rules: one more answers 409 with the reason.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Request
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictStr
from starlette.concurrency import run_in_threadpool

from retrylens.analytics import alerts as alerting
from retrylens.analytics.filters import Slice
from retrylens.analytics.operations import rule_as_dict
from retrylens.analytics.webhook_targets import webhook_refusal
from retrylens.store import EventStore

from .auth import project_access

router = APIRouter(prefix="/v1", tags=["alerts"])

MetricName = StrEnum("MetricName", {name: name for name in alerting.RULE_METRICS})  # type: ignore[misc]
FilterValue = Annotated[StrictStr | None, Field(default=None, min_length=1, max_length=256)]
RuleId = Annotated[str, Path(pattern=r"^[0-9a-f]{12}$", description="The rule's id.")]
ProjectDep = Annotated[str, Depends(project_access)]


def _json_number(value: Any) -> Any:
    """A JSON number and nothing else: no numeric text, no booleans (pydantic's lax mode takes both)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a JSON number")
    return value


def _json_integer(value: Any) -> Any:
    """A JSON integer: ``5`` or ``5.0`` (JSON Schema's ``integer`` admits both), never ``5.5`` or ``"5"``."""
    _json_number(value)
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("must be an integer")
        return int(value)
    return value


JsonNumber = Annotated[float, BeforeValidator(_json_number)]
JsonInteger = Annotated[int, BeforeValidator(_json_integer)]


class AlertRuleBody(BaseModel):
    """An alert rule's settings: ``metric op threshold`` over the last ``window_minutes``."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(min_length=1, max_length=200)
    metric: MetricName = Field(description="A metric or loop/pollution signal.")  # type: ignore[valid-type]
    op: Literal[">", ">=", "<", "<="] = ">"
    threshold: JsonNumber = Field(allow_inf_nan=False, ge=-1e15, le=1e15)
    window_minutes: JsonInteger = Field(default=15, ge=1, le=525_600)
    per: Literal["", "agent", "phase", "error_type", "policy_version"] = Field(
        default="", description="Evaluate per value of this dimension (empty: the slice as a whole).")
    min_calls: JsonInteger = Field(default=0, ge=0, le=1_000_000_000, description="Fewer calls in the window never fire.")
    webhook_url: StrictStr = Field(default="", max_length=2048, pattern=r"^(https?://[^\s]+)?$",
                             description="Where firings and resolutions are posted (empty: the server's default).")
    enabled: StrictBool = True
    agent: FilterValue = None
    phase: FilterValue = None
    error_type: FilterValue = None
    policy_version: FilterValue = None

    def rule(self, project: str, rule_id: str | None = None) -> alerting.AlertRule:
        where = Slice(project=project, agent=self.agent, phase=self.phase, error_type=self.error_type,
                      policy_version=self.policy_version)
        fields: dict[str, Any] = {"rule_id": rule_id} if rule_id else {}
        try:
            return self._build(where, fields)
        except ValueError as exc:  # a combination the rule itself refuses (e.g. a metric's allowed `per`)
            raise HTTPException(422, f"bad alert rule: {exc}") from exc

    def _build(self, where: Slice, fields: dict[str, Any]) -> alerting.AlertRule:
        return alerting.AlertRule(name=self.name, metric=self.metric.value, op=self.op, threshold=float(self.threshold),
                                  window_minutes=self.window_minutes, per=self.per, min_calls=self.min_calls,
                                  webhook_url=self.webhook_url, enabled=self.enabled, where=where, **fields)


class AlertRuleOut(BaseModel):
    rule_id: str
    name: str
    metric: str
    op: str
    threshold: float
    window_minutes: int
    per: str
    min_calls: int
    webhook_url: str
    enabled: bool
    where: dict[str, Any]


class Deleted(BaseModel):
    deleted: str


def _store(request: Request) -> EventStore:
    return request.app.state.store


def _own_rule(store: EventStore, project: str, rule_id: str) -> alerting.AlertRule:
    rule = alerting.get_rule(store, rule_id)
    if rule is None or rule.where.project != project:
        raise HTTPException(404, f"alert rule {rule_id!r} not found in project {project!r}")
    return rule


def _check_webhook(body: AlertRuleBody, request: Request) -> None:
    """A 422 for a webhook the server would refuse to post to (it resolves names: run off the event loop)."""
    if body.webhook_url:
        reason = webhook_refusal(body.webhook_url, request.app.state.settings.alert_webhook_hosts)
        if reason:
            raise HTTPException(422, f"bad alert rule: {reason}")


def _out(rule: alerting.AlertRule) -> dict[str, Any]:
    data = rule_as_dict(rule)
    data["where"] = {k: v for k, v in data["where"].items() if v is not None}
    return data


@router.post("/projects/{project}/alerts/rules", status_code=201, response_model=AlertRuleOut,
             summary="Create an alert rule on the project", responses={409: {"description": "The project has as many rules as it may"}})
async def create_rule(body: AlertRuleBody, project: ProjectDep, request: Request) -> dict[str, Any]:
    await run_in_threadpool(_check_webhook, body, request)
    rule = body.rule(project)
    store, cap = _store(request), request.app.state.settings.alert_rules_per_project

    def create() -> None:
        try:
            alerting.check_rule_cap(store, project, cap)
        except ValueError as exc:
            raise HTTPException(409, str(exc)) from exc
        alerting.save_rule(store, rule)

    await run_in_threadpool(create)
    return _out(rule)


@router.put("/projects/{project}/alerts/rules/{rule_id}", response_model=AlertRuleOut,
            summary="Change an alert rule (its settings are replaced)")
async def replace_rule(body: AlertRuleBody, project: ProjectDep, rule_id: RuleId, request: Request) -> dict[str, Any]:
    store = _store(request)

    def replace() -> alerting.AlertRule:
        _own_rule(store, project, rule_id)
        _check_webhook(body, request)
        return alerting.save_rule(store, body.rule(project, rule_id))

    return _out(await run_in_threadpool(replace))


@router.delete("/projects/{project}/alerts/rules/{rule_id}", response_model=Deleted, summary="Delete an alert rule")
async def delete_rule(project: ProjectDep, rule_id: RuleId, request: Request) -> dict[str, str]:
    store = _store(request)

    def delete() -> None:
        alerting.delete_rule(store, _own_rule(store, project, rule_id))

    await run_in_threadpool(delete)
    return {"deleted": rule_id}
