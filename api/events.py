"""``POST /v1/events``: event ingestion over HTTP for agents that cannot reach Kafka.

Each event of a batch is judged by :func:`retrylens.ingest.process` — the same verdict the
Kafka consumer and the spool ingestor give — and must belong to a project the caller's
key may write (another project is rejected like a malformed event, "project not found").
Valid events travel the configured road: with Kafka they are produced to the event topic
keyed by ``task_id`` (per-task order) and acknowledged by the broker before the answer;
embedded, they are appended (fsync'd) to this server's own spool folder
``<spool_dir>/http``, which the server's spool ingestor drains into the store. Either
way the answer says which items were accepted and why the others were rejected (422 when
none was accepted, so a client that reads only the status sees the failure); a re-sent
event is stored once (its ``event_id`` deduplicates).

A batch the road cannot take (a broker that does not acknowledge, a spool on a full disk,
which rolls the failed append back) is answered 503 with the reason, nothing of it
acknowledged; until a batch goes through again :attr:`EventIntake.fault` holds that
reason and ``/healthz`` reports ``degraded``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import msgspec
import orjson
from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from retrylens.config import Settings
from retrylens.errors import SpoolWriteError
from retrylens.ingest import InvalidMessage, SourceRef
from retrylens.ingest.processor import validate
from retrylens.ingest.redaction import redact_event_text
from retrylens.sdk.transport.build import open_spool
from retrylens.sdk.transport.spool import Spool

from .auth import Principal, principal
from .contract import VALIDATION_BODY

log = logging.getLogger("retrylens.api.events")
router = APIRouter(prefix="/v1", tags=["ingest"])

MAX_BATCH = 5_000
HTTP_SPOOL = "http"
_SOURCE = SourceRef("http", 0, 0)


class EventBatch(BaseModel):
    """A batch of retry events (schema v1 objects, as agents serialize them)."""

    model_config = ConfigDict(extra="forbid")

    events: list[Any] = Field(max_length=MAX_BATCH, description="Retry events; each is validated on its own.")


class Rejected(BaseModel):
    index: int
    reason: str
    detail: str


class IngestResult(BaseModel):
    accepted: int
    rejected: list[Rejected]
    road: str = Field(description="kafka or spool")


class IntakeUnavailable(Exception):
    """The event road (broker or spool) could not take the batch."""


class EventIntake:
    """Hands validated events to Kafka or to the server's spool; opened lazily, closed on shutdown."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._spool: Spool | None = None
        self._producer: Any = None
        #: Why the last batch could not be persisted; None once one went through.
        self.fault: str | None = None

    @property
    def road(self) -> str:
        return "kafka" if self.settings.uses_kafka else "spool"

    def deliver(self, records: list[tuple[bytes, bytes]]) -> None:
        """Durably hand ``(key, value)`` records on, or raise :class:`IntakeUnavailable`."""
        if not records:
            return
        with self._lock:
            try:
                if self.settings.uses_kafka:
                    self._produce(records)
                else:
                    self._append(records)
            except IntakeUnavailable as exc:
                self.fault = str(exc)
                raise
            self.fault = None

    def _append(self, records: list[tuple[bytes, bytes]]) -> None:
        try:
            if self._spool is None:
                self._spool = open_spool(self.settings, HTTP_SPOOL)
            self._spool.append(records, sync=True)  # rolled back if it fails: nothing kept
        except (SpoolWriteError, OSError) as exc:
            log.warning("spool append failed: %s", exc)
            raise IntakeUnavailable(f"the server cannot persist events: {exc}") from exc

    def _produce(self, records: list[tuple[bytes, bytes]]) -> None:
        from retrylens.ingest.kafka_clients import make_producer

        try:
            if self._producer is None:
                self._producer = make_producer(self.settings, max_block_ms=5_000, request_timeout_ms=5_000,
                                               delivery_timeout_ms=15_000)
            futures = [self._producer.send(self.settings.kafka_topic, key=k, value=v) for k, v in records]
            self._producer.flush(timeout=15)
            for future in futures:
                future.get(timeout=0)
        except Exception as exc:  # noqa: BLE001 - any broker failure: the client must retry the batch
            log.warning("Kafka produce failed: %s", exc)
            self._close_producer()
            raise IntakeUnavailable(f"the event broker did not acknowledge the batch: {exc}") from exc

    def _close_producer(self) -> None:
        if self._producer is not None:
            try:
                self._producer.close(timeout=5)
            except Exception:  # noqa: BLE001
                log.debug("closing the producer raised", exc_info=True)
            self._producer = None

    def close(self) -> None:
        with self._lock:
            self._close_producer()
            if self._spool is not None:
                self._spool.close()
                self._spool = None


def judge(items: list[Any], who: Principal) -> tuple[list[tuple[bytes, bytes]], list[Rejected]]:
    """Valid events of the caller's projects as (task_id, payload) records, and the rejections.

    An event whose text held a secret is passed on re-encoded without it (and with its
    event id, derived from what was sent when it had none), so no broker or spool keeps it."""
    accepted: list[tuple[bytes, bytes]] = []
    rejected: list[Rejected] = []
    for index, item in enumerate(items):
        try:
            payload = orjson.dumps(item)
        except (TypeError, orjson.JSONEncodeError) as exc:
            rejected.append(Rejected(index=index, reason="bad_json", detail=str(exc)))
            continue
        event = validate(payload, _SOURCE, redacted=False)
        if isinstance(event, InvalidMessage):
            rejected.append(Rejected(index=index, reason=event.reason.value, detail=event.detail))
        elif not who.can_read(event.project):
            rejected.append(Rejected(index=index, reason="project_not_found",
                                     detail=f"project {event.project!r} not found"))
        else:
            clean = redact_event_text(event)
            if clean is not event:
                payload = _encoded(clean)
            accepted.append((event.task_id.encode(), payload))
    return accepted, rejected


def _encoded(event: Any) -> bytes:
    """A validated event (a ``WireEvent`` or a ``RetryEvent``) as JSON the processor reads."""
    if isinstance(event, BaseModel):
        return event.model_dump_json(exclude_none=False).encode()
    return msgspec.json.encode(event)


_REJECTED_ITEM = {"type": "object", "required": ["index", "reason", "detail"],
                  "properties": {"index": {"type": "integer"}, "reason": {"type": "string"},
                                 "detail": {"type": "string"}}}
ALL_REJECTED: dict[str, Any] = {
    "title": "AllRejected", "type": "object", "required": ["detail", "accepted", "rejected", "road"],
    "properties": {"detail": {"type": "string"}, "accepted": {"type": "integer"},
                   "rejected": {"type": "array", "items": _REJECTED_ITEM}, "road": {"type": "string"}},
}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    503: {"description": "The broker or spool could not take the batch; retry it."},
    422: {"description": "Every event of the batch was rejected (each with its reason), or the body failed "
                         "validation.",
          "content": {"application/json": {"schema": {"anyOf": [ALL_REJECTED, VALIDATION_BODY]}}}},
}


@router.post("/events", response_model=IngestResult, summary="Ingest a batch of retry events",
             responses=_RESPONSES)
def ingest_events(batch: EventBatch, request: Request, who: Principal = Depends(principal)) -> Any:
    """200 with what was accepted and why the rest was rejected; 422 when nothing was accepted."""
    accepted, rejected = judge(batch.events, who)
    intake: EventIntake = request.app.state.intake
    try:
        intake.deliver(accepted)
    except IntakeUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
    result = IngestResult(accepted=len(accepted), rejected=rejected, road=intake.road)
    if rejected and not accepted:
        detail = f"every event of the batch was rejected ({len(rejected)}); see 'rejected' for each reason"
        return JSONResponse(status_code=422, content={"detail": detail, **result.model_dump()})
    return result
