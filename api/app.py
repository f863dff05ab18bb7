"""The FastAPI application: ``create_app(settings, store)`` wires routers, auth and limits.

One app per store. The server process (``retrylens serve``, :mod:`.server`) opens the
store and runs the ingest threads beside it; tests pass the fixture store in. Routes:

- ``/healthz`` (no auth), ``/metrics`` (Prometheus, no auth), ``/openapi.json``, ``/docs``;
- ``/v1/precheck`` (:mod:`.precheck`), ``/v1/events`` (:mod:`.events`), ``/v1/traces`` (OTLP, :mod:`.otlp`);
- ``/v1/policies/…`` and ``/v1/kill-switch/…`` (:mod:`.policies`);
- ``/v1/projects/{project}/…`` and ``/v1/model`` read endpoints (:mod:`.reads`), alert rules (:mod:`.alert_rules`);
  ``/v1/projects/{project}/policy-reports`` the policy report on demand (:mod:`.policy_reports`);
  ``/v1/fleet/…`` the same first-screen reads over every project the key may read (:mod:`.fleet`);
- ``/v1/ops/{name}``, the CLI's store operations for the local token (:mod:`.operations`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from retrylens import __version__
from retrylens.config import Settings
from retrylens.store import EventStore, open_store

from . import (
    alert_rules,
    events,
    fleet,
    intake_thread,
    iso_patterns,
    offload,
    operations,
    otlp,
    policies,
    policy_reports,
    precheck,
    precheck_log,
    reads,
)
from .auth import KeyRing, local_token
from .contract import answer_405_with_every_method, declare_errors
from .cost_budget import CostBudget
from .ingest_budget import IngestBudget
from .middleware import (
    BodySizeLimit,
    BodyTooLarge,
    RequestMetrics,
    require_json_body,
    too_large_handler,
)
from .otlp_memory import TraceBook
from .shadow import ShadowReportProvider

log = logging.getLogger("retrylens.api")


def create_app(
    settings: Settings, store: EventStore | None = None, *, shadow_reports: ShadowReportProvider | None = None,
    health: Any = None,
) -> FastAPI:
    """The API over ``store`` (opened from ``settings`` when not given).

    ``health`` is an optional callable returning a dict merged into ``/healthz`` (the
    server passes the ingest threads' status).
    """
    store = store or open_store(settings)
    intake = events.EventIntake(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        offload.warm_up()
        yield
        intake_thread.shutdown()  # its last exports reach the spool before the intake closes
        intake.close()
        app.state.precheck_log.close()
        offload.shutdown()

    app = FastAPI(
        title="RetryLens API",
        version=__version__,
        description="Pre-flight risk, retry analytics, event ingestion and the retry-policy configuration centre.",
        lifespan=lifespan,
        dependencies=[Depends(require_json_body)],
    )
    app.state.settings = settings
    app.state.store = store
    app.state.keyring = KeyRing(settings.api_keys, local_token(settings))
    app.state.intake = intake
    app.state.precheck_log = precheck_log.PrecheckLog(store)
    app.state.shadow_reports = shadow_reports
    app.state.scorer = precheck.RiskScorer(settings, store)
    app.state.policies = policies.PolicyStore(store)
    app.state.started = time.time()
    app.state.otlp_book = TraceBook(max_bytes=settings.otlp_memory_bytes)

    app.add_middleware(BodySizeLimit, max_bytes=settings.api_max_body_bytes)
    app.state.cost_budget = (CostBudget(settings.api_ingest_cpu_share, settings.api_ingest_cpu_burst_s)
                             if settings.api_ingest_cpu_share > 0 else None)
    app.add_middleware(IngestBudget, keyring=app.state.keyring, rate_bytes=settings.api_ingest_rate_bytes,
                       burst_bytes=settings.api_ingest_burst_bytes, cost=app.state.cost_budget)
    app.add_middleware(RequestMetrics)
    app.add_exception_handler(BodyTooLarge, too_large_handler)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected_error)
    answer_405_with_every_method(app)

    @app.get("/healthz", tags=["ops"], summary="Liveness (no auth)")
    async def healthz() -> dict[str, Any]:
        """``ok``, or ``degraded`` with the reason while events cannot be persisted (still 200:
        the process is alive and serves reads; the event routes answer 503 meanwhile)."""
        extra = health() if health is not None else {}
        fault = {"status": "degraded", "reason": intake.fault} if intake.fault else {"status": "ok"}
        return {**fault, "version": __version__, "uptime_s": round(time.time() - app.state.started, 3),
                "store": "embedded" if settings.is_embedded_store else "server",
                "ingest": "kafka" if settings.uses_kafka else "spool", **extra}

    @app.get("/metrics", tags=["ops"], summary="Prometheus metrics (no auth)", response_class=Response)
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    declare_errors(precheck.router, events.router, otlp.router, policies.router, reads.router, fleet.router,
                   alert_rules.router, policy_reports.router)
    app.include_router(precheck.router)
    app.include_router(events.router)
    app.include_router(otlp.router)
    app.include_router(policies.router)
    app.include_router(reads.router)
    app.include_router(fleet.router)
    app.include_router(alert_rules.router)
    app.include_router(policy_reports.router)
    app.include_router(operations.router)
    return app


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    """422 listing every problem as ``location: message`` (no echo of the input)."""
    assert isinstance(exc, RequestValidationError)
    errors = [{"loc": list(e.get("loc", ())), "msg": _message(e), "type": str(e.get("type", ""))}
              for e in exc.errors()]
    summary = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors[:10])
    return JSONResponse(status_code=422, content={"detail": errors, "message": summary})


def _message(error: dict[str, Any]) -> str:
    """The error's message; a pattern the API declares is named in words, not as a regex."""
    pattern = (error.get("ctx") or {}).get("pattern") if error.get("type") == "string_pattern_mismatch" else None
    return iso_patterns.MEANING.get(pattern, str(error.get("msg", ""))) if isinstance(pattern, str) \
        else str(error.get("msg", ""))


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse(status_code=500, content={"detail": "internal server error"})
