"""The error half of the OpenAPI contract, derived from what each route really depends on.

A generated client can only trust the document if every status an operation can answer
is declared with its body. The errors here do not come from the route functions but from
what they depend on, so they are declared from the same facts, once, after the routers
are included (:func:`declare_errors`), instead of by hand on each decorator where a new
route would forget one:

- a route that authenticates (depends on :func:`.auth.principal`) answers **401**;
- a route scoped to a ``{project}`` (:func:`.auth.project_access`) or another path
  resource answers **404** (an unknown project or one the key may not read look alike);
- a route that takes a body answers **413** past ``api_max_body_bytes`` and **400** for an
  unreadable ``Content-Length`` (:class:`.middleware.BodySizeLimit`), and a route with a JSON
  body model **415** for another content type (:func:`.middleware.require_json_body`);
- an ingest route (``POST /v1/events``, ``/v1/traces``) answers **429** with ``Retry-After`` past
  its key's byte budget (:class:`.ingest_budget.IngestBudget`) or its project's CPU budget
  (:mod:`.cost_budget`);
- a route with parameters or a body answers **422** with the body
  :func:`.app._validation_error` sends (``detail`` plus ``message``), declared instead of
  FastAPI's default one.

A wrong method answers 405 with an ``Allow`` of every method of the path
(:func:`answer_405_with_every_method`). Route-specific answers (``POST /v1/events`` 503, the policy 304, ``/v1/traces``' 415)
stay on their decorators; what a decorator declares wins.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_flat_params
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute

from .auth import principal, project_access
from .ingest_budget import INGEST_PATHS

ERROR_BODY: dict[str, Any] = {
    "title": "ErrorBody", "type": "object", "required": ["detail"],
    "properties": {"detail": {"type": "string", "description": "What went wrong, in one sentence."}},
}
VALIDATION_BODY: dict[str, Any] = {
    "title": "ValidationErrorBody", "type": "object", "required": ["detail"],
    "properties": {
        "detail": {"type": "array", "items": {
            "type": "object", "required": ["loc", "msg", "type"],
            "properties": {"loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
                           "msg": {"type": "string"}, "type": {"type": "string"}}}},
        "message": {"type": "string", "description": "The problems as `location: message`, joined by '; '."},
    },
}


def _error(description: str, schema: dict[str, Any] = ERROR_BODY, **extra: Any) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}, **extra}


UNAUTHORIZED = _error("No API key, or an unknown one (send X-API-Key or Authorization: Bearer).",
                      headers={"WWW-Authenticate": {"schema": {"type": "string"}}})
NOT_FOUND = _error("Not found: an unknown project and one this key may not read answer alike.")
TOO_LARGE = _error("The request body exceeds api_max_body_bytes; for a batch of events the answer also says how "
                   "many of its events fit in one request.", {
    **ERROR_BODY, "title": "TooLargeBody",
    "properties": {**ERROR_BODY["properties"],
                   "limit_bytes": {"type": "integer", "description": "api_max_body_bytes"},
                   "body_bytes": {"type": "integer", "description": "The size of the refused body."},
                   "events_fit": {"type": "integer", "description": "About how many of the batch's events fit."}}})
NOT_JSON = _error("The body was not sent as JSON (Content-Type: application/json).")
BAD_LENGTH = _error("The Content-Length header is not a number.")
INVALID = _error("The request failed validation.", VALIDATION_BODY)
OVER_BUDGET = _error("This key sent more than its ingest budget (api_ingest_rate_bytes a second after a burst of "
                     "api_ingest_burst_bytes), or its project's exports cost more CPU than its share "
                     "(api_ingest_cpu_share a second after api_ingest_cpu_burst_s); send again after Retry-After "
                     "seconds.",
                     headers={"Retry-After": {"schema": {"type": "integer"},
                                              "description": "Seconds until the key's budget lets a request in."}})


def _calls(dependant: Dependant, target: object) -> bool:
    return dependant.call is target or any(_calls(d, target) for d in dependant.dependencies)


def _names_project(route: APIRoute) -> bool:
    """A body that names the ``project`` it is about (checked against the key: 404)."""
    model = route.body_field.field_info.annotation if route.body_field is not None else None
    fields = getattr(model, "model_fields", {})
    return "project" in fields and _calls(route.dependant, principal)


def errors_of(route: APIRoute) -> dict[int | str, dict[str, Any]]:
    """The error responses ``route`` can give, from its dependencies, path and body."""
    found: dict[int | str, dict[str, Any]] = {}
    if _calls(route.dependant, principal):
        found[401] = UNAUTHORIZED
    if _calls(route.dependant, project_access) or "{" in route.path_format or _names_project(route):
        found[404] = NOT_FOUND
    if route.body_field is not None or route.methods & {"POST", "PUT", "PATCH"}:
        found[413] = TOO_LARGE
        found[400] = BAD_LENGTH
    if route.body_field is not None:
        found[415] = NOT_JSON
    if "POST" in route.methods and route.path in INGEST_PATHS:
        found[429] = OVER_BUDGET
    if get_flat_params(route.dependant) or route.body_field is not None:
        found[422] = INVALID
    return found


def declare_errors(*routers: APIRouter) -> None:
    """Add the derived error responses to every route of ``routers`` (decorators win).

    Call it before the routers are included: the app builds its routes from theirs.
    """
    for router in routers:
        for route in router.routes:
            if isinstance(route, APIRoute):
                route.responses = {**errors_of(route), **route.responses}


def answer_405_with_every_method(app: FastAPI) -> None:
    """405 lists in ``Allow`` every method the path has, not only those of the first route.

    Starlette answers a wrong method with the ``Allow`` of the first route whose path
    matches, but ``GET`` and ``PUT`` of one path are separate routes here.
    """
    from fastapi.exception_handlers import http_exception_handler
    from starlette.exceptions import HTTPException as StarletteHTTPException

    templates: list[tuple[re.Pattern[str], list[str]]] = []

    async def handler(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code != 405:
            return await http_exception_handler(request, exc)
        if not templates:
            for path, item in app.openapi()["paths"].items():
                pattern = re.compile("^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(path)) + "$")
                templates.append((pattern, [m.upper() for m in item]))
        allowed = sorted({m for pattern, methods in templates if pattern.match(request.url.path) for m in methods})
        return JSONResponse({"detail": "Method Not Allowed"}, status_code=405, headers={"Allow": ", ".join(allowed)})

    app.add_exception_handler(StarletteHTTPException, handler)
