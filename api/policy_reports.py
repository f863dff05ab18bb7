"""``POST /v1/projects/{project}/policy-reports``: the policy report of ``retrylens report policies``, on demand.

An operator (or a CI job) sends candidate policies, each as the fields it changes against
the live policy, and gets the report the CLI writes, for the project's own history only:
per candidate its verdict ("better", "worse", "not supported by the log" …) and why, the
exploration that would produce missing evidence, the estimates with their 95 % intervals
and bounds, the support gaps, per-agent verdicts, the off-policy estimates and the
baseline (which live policy the differences are against, with its warnings). Nothing is
written to the server's report folder: that folder is the operator's, shared by every
project, while this answer belongs to the caller's project alone.

The live policy is the one the project's events name, from the policy store (``PUT
/v1/policies``), else the SDK defaults (the report then warns), unless the body gives
``live``. A candidate whose changes do not make a valid policy is a 422 naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.concurrency import run_in_threadpool

from retrylens.errors import PolicyError
from retrylens.evaluation.operations import policy_report

from .auth import project_access
from .serialize import plain

router = APIRouter(prefix="/v1", tags=["read"])

ProjectDep = Annotated[str, Depends(project_access)]
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$"


class CandidateChanges(BaseModel):
    """One candidate: a name and the policy fields it changes (merged key by key into the live policy)."""

    model_config = ConfigDict(extra="forbid", strict=True)  # JSON types as the schema says: no false for 0

    name: str = Field(pattern=NAME_PATTERN, description="The candidate's name in the report.")
    changes: dict[str, Any] = Field(description="Policy fields changed against the live policy, e.g. "
                                                "{\"caps\": {\"validation\": 3}}; an empty mapping is the live policy.")


class PolicyReportRequest(BaseModel):
    """Candidates to judge on the project's history, and how."""

    model_config = ConfigDict(extra="forbid", strict=True)  # JSON types as the schema says: no false for 0

    candidates: list[CandidateChanges] = Field(min_length=1, max_length=10)
    live: dict[str, Any] | None = Field(default=None, description="The live policy, whole (default: the one the "
                                        "project's events name, from the policy store; else the SDK defaults).")
    agent: str | None = Field(default=None, min_length=1, max_length=256, description="Only this agent's tasks.")
    hours: float | None = Field(default=None, gt=0, le=24 * 366, description="Only the last N hours.")
    replicates: int = Field(default=400, ge=50, le=2_000, description="Bootstrap replicates.")
    seed: int = Field(default=0, ge=0, le=2**32 - 1, description="Seed of the bootstrap.")
    min_success_gain: float = Field(default=0.01, ge=0, lt=1, description="Adopt for success only when the CI's "
                                    "lower bound of the gain is at least this (0.01 = 1 percentage point).")
    min_cost_saving: float = Field(default=0.05, ge=0, lt=1, description="Adopt a cheaper candidate only when "
                                   "its CI's bound saves at least this share of the live cost.")

    @field_validator("candidates")
    @classmethod
    def _distinct(cls, value: list[CandidateChanges]) -> list[CandidateChanges]:
        names = [c.name for c in value]
        if len(set(names)) != len(names):
            raise ValueError(f"candidate names must differ, got {names}")
        return value


@router.post("/projects/{project}/policy-reports",
             summary="Judge candidate retry policies on the project's history (the policy report)")
async def post_policy_report(request: Request, project: ProjectDep, body: PolicyReportRequest) -> dict[str, Any]:
    """The report: ``recommendation`` (decision, reason, per candidate its verdict and why, per
    agent too), ``lines`` (what the CLI prints), ``policies`` (estimates, differences to live with
    95 % intervals, bounds, support gaps), ``off_policy``, ``baseline``, ``evidence``, ``limitations``."""
    from retrylens.evaluation.report import recommendation_lines

    candidates = [{"name": c.name, "changes": c.changes, "source": f"candidates.{i}", "policy": None}
                  for i, c in enumerate(body.candidates)]
    try:
        report = await run_in_threadpool(
            policy_report, request.app.state.store, live=body.live, candidates=candidates, project=project,
            agent=body.agent, hours=body.hours, replicates=body.replicates, seed=body.seed,
            min_success_gain=body.min_success_gain, min_cost_saving=body.min_cost_saving)
    except PolicyError as exc:
        raise RequestValidationError([{"loc": _where(exc, body), "msg": str(exc), "type": "policy_error"}]) from None
    return {"project": project, **plain(report), "lines": recommendation_lines(report)}


def _where(exc: PolicyError, body: PolicyReportRequest) -> list[str | int]:
    """``body.candidates.<i>.changes.<field>`` (or ``body.live.<field>``) of the policy that failed."""
    source = str(getattr(exc, "source", "") or "")
    field = [part for part in (exc.field or "").split(".") if part]
    for i, _ in enumerate(body.candidates):
        if source == f"candidates.{i}":
            return ["body", "candidates", i, "changes", *field]
    return ["body", "live", *field]
