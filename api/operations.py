"""``POST /v1/ops/{name}``: the command line's store operations, run by the store's owner.

chDB lets one process open an embedded store. While ``retrylens serve`` owns it, the CLI
on the same machine cannot open it, so it sends the operation here and the server runs the
very function the CLI would have run (:mod:`retrylens.analytics.operations`); the command
prints the answer as it prints its own result.

Only the server's **local token** (``<data_dir>/api-token``, readable by the user who owns
the data directory, see :mod:`.auth`) may call it: the same user could open the store
directly if the server were not running. Project keys get 403. The route is the CLI's
private channel and stays out of the OpenAPI document; the public API has its own routes.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from retrylens.analytics import operations
from retrylens.evaluation import operations as _evaluation_operations  # noqa: F401 - registers its own

from .auth import Principal, principal

router = APIRouter(prefix="/v1", tags=["ops"], include_in_schema=False)


@router.post("/ops/{name}")
async def run_operation(
    name: str, request: Request, params: dict[str, Any] = Body(default_factory=dict),
    who: Principal = Depends(principal),
) -> Any:
    if who.projects is not None:
        raise HTTPException(403, "store operations take the server's local token (<data_dir>/api-token), "
                                 "not a project key")
    if name not in operations.OPERATIONS:
        raise HTTPException(404, f"unknown operation {name!r}")
    try:
        return await run_in_threadpool(operations.run, name, request.app.state.store, request.app.state.settings,
                                       params)
    except (ValueError, TypeError) as exc:
        raise HTTPException(422, str(exc)) from exc
