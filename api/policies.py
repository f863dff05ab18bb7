"""The policy configuration centre: versioned policies per project and agent, kill switches.

- ``PUT /v1/policies/{project}`` — the project's default policy (new revision);
- ``PUT /v1/policies/{project}/{agent}`` — the agent's policy (new revision);
- ``GET /v1/policies/{project}/{agent}`` — what the SDK's ``ApiPoller`` polls: the
  effective policy as a plain policy document, with ``ETag`` (``If-None-Match`` → 304)
  and ``X-Policy-Revision``; 404 when nothing is configured (the agent keeps its own);
- ``GET /v1/policies/{project}`` — overview; ``…/{agent}/history`` — revisions;
- ``GET|PUT /v1/kill-switch/{project}[/{agent}]`` — stop automatic retries at once for
  the whole project or one agent; agents see it in their next poll.

A PUT body that is not a valid policy is a 422 whose message and ``loc`` name the field.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, StrictBool, WithJsonSchema

from retrylens.errors import PolicyError

from .auth import project_access
from .params import Limit
from .policy_body import policy_body_schema
from .policy_store import PROJECT_DEFAULT, PolicyStore

router = APIRouter(prefix="/v1", tags=["policies"])

#: Agent names may hold "/" ("team/planner", sent as ``team%2Fplanner``): the routes take the
#: rest of the path as the name (``{agent:path}``), so a name is never cut at its slash. A name
#: ending in "/history" reads its history route, not its policy.
AGENT_PATTERN = r"^[^\x00-\x1f]{1,256}$"
AgentName = Annotated[str, Path(pattern=AGENT_PATTERN, description="Agent name (may hold '/').")]
ProjectDep = Annotated[str, Depends(project_access)]
PolicyBody = Annotated[dict[str, Any], WithJsonSchema(policy_body_schema()), Body(
    examples=[{"id": "shop", "caps": {"timeout": 2}, "budget": {"max_attempts": 3}}],
)]

class KillSwitchChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool = Field(description="true stops automatic retries; false lifts the switch (a JSON boolean).")
    reason: str = Field(default="", max_length=500)


def policy_store(request: Request) -> PolicyStore:
    return request.app.state.policies


StoreDep = Annotated[PolicyStore, Depends(policy_store)]


def _put(store: PolicyStore, project: str, agent: str, body: dict[str, Any]) -> dict[str, Any]:
    try:
        record = store.put(project, agent, body)
    except PolicyError as exc:
        loc = ("body", *[part for part in exc.field.split(".") if part]) if exc.field else ("body",)
        raise RequestValidationError([{"loc": loc, "msg": str(exc), "type": "policy_error"}]) from None
    return record.as_dict()


@router.put("/policies/{project}", summary="Set the project's default policy (new revision)")
def put_project_policy(store: StoreDep, project: ProjectDep, body: PolicyBody) -> dict[str, Any]:
    return _put(store, project, PROJECT_DEFAULT, body)


@router.get("/policies/{project}", summary="Policies and kill switches of a project")
def get_project_policies(store: StoreDep, project: ProjectDep) -> dict[str, Any]:
    records = store.current(project)
    default = next((r for r in records if r.agent == PROJECT_DEFAULT), None)
    return {
        "project": project,
        "default": default.as_dict() if default else None,
        "agents": [r.summary() for r in records if r.agent != PROJECT_DEFAULT],
        "kill_switch": store.kill_state(project).as_dict(),
    }


@router.get("/policies/{project}/{agent:path}/history", summary="Revisions of an agent's policy, newest first")
def get_agent_history(store: StoreDep, project: ProjectDep, agent: AgentName, limit: Limit = 50) -> list[dict[str, Any]]:
    return [r.as_dict() for r in store.history(project, agent, limit=limit)]


@router.put("/policies/{project}/{agent:path}/history", include_in_schema=False)
def history_is_read_only() -> Response:
    """A history is read-only: without this route ``PUT …/{agent}/history`` would match the
    policy write below as an agent named "{agent}/history" (its ``{agent:path}`` takes the
    rest of the path) and answer as a malformed write instead of 405."""
    return Response(status_code=405, headers={"Allow": "GET"})


@router.put("/policies/{project}/{agent:path}", summary="Set an agent's policy (new revision)")
def put_agent_policy(store: StoreDep, project: ProjectDep, agent: AgentName, body: PolicyBody) -> dict[str, Any]:
    return _put(store, project, agent, body)


@router.get(
    "/policies/{project}/{agent:path}",
    summary="The effective policy an agent should run (polled by the SDK)",
    responses={304: {"description": "Unchanged since the ETag sent in If-None-Match."},
               404: {"description": "No policy configured for this agent or project."}},
)
def get_agent_policy(store: StoreDep, project: ProjectDep, agent: AgentName, request: Request) -> Response:
    effective = store.effective(project, agent)
    if effective is None:
        return _json_response(404, {"detail": f"no policy configured for {project}/{agent}"})
    headers = {"ETag": effective.etag, "Cache-Control": "no-cache", "X-Policy-Source": effective.source}
    if effective.revision is not None:
        headers["X-Policy-Revision"] = str(effective.revision)
    if effective.etag in _etags(request.headers.get("if-none-match", "")):
        return Response(status_code=304, headers=headers)
    return _json_response(200, effective.body, headers)


@router.get("/kill-switch/{project}", summary="Kill switches in force for a project")
def get_kill_switch(store: StoreDep, project: ProjectDep) -> dict[str, Any]:
    return store.kill_state(project).as_dict()


@router.put("/kill-switch/{project}", summary="Stop (or resume) automatic retries for the whole project")
def put_project_kill_switch(store: StoreDep, project: ProjectDep, change: KillSwitchChange) -> dict[str, Any]:
    return store.set_kill(project, PROJECT_DEFAULT, change.enabled, change.reason).as_dict()


@router.put("/kill-switch/{project}/{agent:path}", summary="Stop (or resume) automatic retries for one agent")
def put_agent_kill_switch(store: StoreDep, project: ProjectDep, agent: AgentName,
                          change: KillSwitchChange) -> dict[str, Any]:
    return store.set_kill(project, agent, change.enabled, change.reason).as_dict()


def _etags(header: str) -> set[str]:
    return {part.strip().removeprefix("W/") for part in header.split(",") if part.strip()}


def _json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    from fastapi.responses import JSONResponse

    return JSONResponse(status_code=status, content=body, headers=headers)
