"""``POST /v1/traces``: OTLP/HTTP traces from any instrumented agent become retry events.

Most agents already export OpenTelemetry (OpenInference, OpenLLMetry, Logfire, the
GenAI conventions), and none of them says which spans are retries. This endpoint infers
it and feeds the result through the same judge and road as ``POST /v1/events``
(:func:`.events.judge`, :class:`.events.EventIntake`), so OTLP-born events are
validated, stored and counted exactly like the SDK's. The mapping (README, "OpenTelemetry"):

- **task** = the trace: ``task_id = "otel-<trace_id>"``; the trace's root span (the
  agent/workflow span) gives ``task_started``/``task_finished`` (outcome from its status);
  the agent is the resource's ``service.name``.
- **operation** = a GenAI span (``gen_ai.operation.name``/``gen_ai.request.model``/
  ``gen_ai.provider.name``/``gen_ai.system`` or an OpenInference LLM/TOOL kind), not an
  agent or workflow span. Spans of one parent doing the same operation (``chat`` on any
  model: a fallback model is a retry) are one operation's **attempts** while each
  predecessor errored (a clean predecessor starts a new operation); the HTTP request spans
  under one GenAI span are its attempts, one per physical request;
  ``correlation_id`` is the first attempt's span id.
- per attempt ``attempt_started`` and ``attempt_failed`` (error type from the HTTP status,
  ``error.type`` or the exception) or ``attempt_succeeded``; tokens from
  ``gen_ai.usage.input_tokens``/``output_tokens``; cost from the ``otlp_prices`` setting.
- after a failed attempt a ``decision``, **inferred**: ``retry_backoff`` (gap as
  ``backoff_ms``) when a next attempt is seen, ``give_up`` once the root span ended
  without one; ``decision_reason`` starts with "inferred from OTLP".
- ``event_id`` = UUIDv5 of (trace id, span id, kind): a re-sent span is stored once.

Spans arrive in batches (children before their root), so the server keeps the recent
spans of each trace in memory (:class:`~.otlp_memory.TraceBook`, bounded per project) and re-derives the trace's
events on every batch; only events not yet sent are delivered. Spans our own SDK
exported (``retrylens.task_id`` set) are skipped: their events already came directly.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse, Response

from retrylens.errors import OtlpTooLarge
from retrylens.schemas.limits import MAX_NAME_CHARS
from retrylens.schemas.taxonomy import TRANSIENT_ERROR_TYPES, ErrorType

from .auth import Principal, principal
from .cost_budget import PROJECT_HEADER, CostBudget, payers
from .events import EventIntake, IntakeUnavailable, judge
from .intake_thread import on_intake_thread
from .measured import Measured, measured
from .offload import in_worker
from .otlp_decode import JSON, PROTOBUF, OtlpDecodeError, OtlpUnsupported, Span
from .otlp_memory import TraceBook, kept_spans

router = APIRouter(prefix="/v1", tags=["ingest"])

NAMESPACE = uuid.UUID("5f0c7d0e-5a1e-4c3a-9a59-0e1a7f0d2b41")
INFERRED = "inferred from OTLP"
AGENT_KINDS = frozenset({"invoke_agent", "create_agent", "invoke_workflow", "AGENT", "CHAIN", "workflow", "agent"})
OPERATION_KINDS = frozenset({"LLM", "TOOL", "EMBEDDING", "RETRIEVER", "RERANKER"})


def is_operation(span: Span) -> bool:
    """A GenAI model/tool call (an attempt), as opposed to an agent/workflow span or plumbing."""
    kind = span.attrs.get("gen_ai.operation.name") or span.attrs.get("openinference.span.kind") \
        or span.attrs.get("traceloop.span.kind")
    if kind in AGENT_KINDS:
        return False
    return kind in OPERATION_KINDS or any(
        key in span.attrs for key in ("gen_ai.operation.name", "gen_ai.request.model", "gen_ai.provider.name",
                                      "gen_ai.system"))


def trace_events(trace_id: str, spans: dict[str, Span], project: str,
                 prices: dict[str, tuple[float, float]]) -> list[dict[str, Any]]:
    """The retry events (JSON objects, schema v1) a trace's spans imply, in order."""
    spans = {k: s for k, s in spans.items() if "retrylens.task_id" not in s.attrs}
    if not spans:
        return []
    root = next((s for s in spans.values() if s.parent_id is None), None)
    any_span = root or next(iter(spans.values()))
    base = {"schema_version": 1, "project": project, "task_id": f"otel-{trace_id}", "trace_id": trace_id,
            "phase": "execution",
            "agent": {"name": str(any_span.resource.get("service.name") or "unknown_service")[:MAX_NAME_CHARS]}}
    out: list[dict[str, Any]] = []
    if root is not None:
        out.append(_event(base, root, "task_started", root.start_ns, correlation_id=root.span_id,
                          span_id=root.span_id))
    chains: dict[tuple[str | None, str], list[Span]] = {}
    requests = http_requests(spans)
    for span in spans.values():
        if is_operation(span) and span.span_id not in requests.attempts:
            chains.setdefault((span.parent_id, _operation_kind(span)), []).append(span)
    last: tuple[int, bool] | None = None  # (end, failed) of the latest attempt
    most = 0
    for chain in chains.values():
        chain.sort(key=lambda s: (s.start_ns, s.span_id))
        # (attempt span, its operation, whether the operation's usage goes on it: its last request)
        units = [(unit, op, unit is requests.of(op)[-1]) for op in chain for unit in requests.of(op)]
        attempt, first = 0, units[0][0]
        for i, (unit, op, usage) in enumerate(units):
            if i == 0 or not failed(units[i - 1][0]):
                attempt, first = 1, unit
            else:
                attempt += 1
            most = max(most, attempt)
            following = units[i + 1][0] if i + 1 < len(units) else None
            events = _attempt(base, unit, attempt, first.span_id, following, root, prices, op, usage)
            for event in events:  # at equal times, an attempt's events before the next one's
                event["_seq"] = len(out)
            out.extend(events)
            if last is None or unit.end_ns >= last[0]:
                last = (unit.end_ns, failed(unit))
    if root is not None and root.end_ns:
        # the root's own status when it set one, else the last attempt's result
        lost = root.error or (not root.ok and last is not None and last[1])
        end = max(root.end_ns, last[0] if last else 0)
        out.append(_event(base, root, "task_finished", end, correlation_id=root.span_id,
                          span_id=root.span_id, outcome="failed" if lost else "succeeded", attempt=most,
                          latency_ms=_ms(end - root.start_ns)))
    # causal order: the task's start first, its end last, the rest by time; a retry starting
    # the instant its predecessor failed comes after that failure and its decision
    out.sort(key=lambda e: (_PLACE.get(e["kind"], 1), e.pop("_ns"), e.pop("_seq", 0), _ORDER[e["kind"]]))
    return out


def _operation_kind(span: Span) -> str:
    """What an operation does (``chat``, ``execute_tool``, an OpenInference kind), else its
    name: a failed ``chat gpt-4o`` followed by ``chat gpt-4o-mini`` is one operation retried
    on a fallback model, as the SDK numbers it."""
    a = span.attrs
    return str(a.get("gen_ai.operation.name") or a.get("openinference.span.kind") or span.name)


class HttpRequests:
    """The HTTP client spans under GenAI spans: each one physical request, so one attempt."""

    def __init__(self) -> None:
        self.by_operation: dict[str, list[Span]] = {}
        self.attempts: set[str] = set()

    def of(self, operation: Span) -> list[Span]:
        """The attempts of ``operation``: its HTTP requests, or the span itself without any."""
        return self.by_operation.get(operation.span_id) or [operation]


def http_requests(spans: dict[str, Span]) -> HttpRequests:
    found = HttpRequests()
    for span in spans.values():
        parent = spans.get(span.parent_id or "")
        if parent is None or not is_operation(parent) or not _is_http(span):
            continue
        found.by_operation.setdefault(parent.span_id, []).append(span)
        found.attempts.add(span.span_id)
    for requests in found.by_operation.values():
        requests.sort(key=lambda s: (s.start_ns, _int(s.attrs.get("http.request.resend_count", 0)), s.span_id))
    return found


def _is_http(span: Span) -> bool:
    a = span.attrs
    return ("http.request.method" in a or "http.method" in a) and "gen_ai.operation.name" not in a


def failed(span: Span) -> bool:
    """An errored span, or an HTTP request answered with a 4xx/5xx."""
    if span.error:
        return True
    status = _status(span)
    return status is not None and status >= 400 and _is_http(span)


def _status(span: Span) -> int | None:
    value = span.attrs.get("http.response.status_code", span.attrs.get("http.status_code"))
    try:
        code = int(value)
    except (TypeError, ValueError):
        return None
    return code if 0 <= code <= 999 else None


_PLACE = {"task_started": 0, "task_finished": 2}
_ORDER = {"task_started": 0, "attempt_started": 1, "attempt_failed": 2, "attempt_succeeded": 2, "decision": 3,
          "task_finished": 4}


def _attempt(base: dict[str, Any], span: Span, attempt: int, correlation: str, following: Span | None,
             root: Span | None, prices: dict[str, tuple[float, float]], op: Span,
             with_usage: bool = True) -> list[dict[str, Any]]:
    """The events of one attempt: ``span`` itself, or one HTTP request of the GenAI span ``op``."""
    a = op.attrs  # model, provider and usage are the operation's
    model = str(a.get("gen_ai.response.model") or a.get("gen_ai.request.model") or "")
    dependency = str(a.get("gen_ai.provider.name") or a.get("gen_ai.system") or a.get("server.address") or "")
    dependency = f"{dependency}/{model}" if dependency and model else dependency or model
    usage = a if with_usage else {}
    tokens_in = _int(usage.get("gen_ai.usage.input_tokens", usage.get("gen_ai.usage.prompt_tokens",
                                                                       usage.get("llm.token_count.prompt", 0))))
    tokens_out = _int(usage.get("gen_ai.usage.output_tokens", usage.get("gen_ai.usage.completion_tokens",
                                                                         usage.get("llm.token_count.completion", 0))))
    price_in, price_out = prices.get(model, (0.0, 0.0))
    common = {"correlation_id": correlation, "span_id": span.span_id, "parent_span_id": span.parent_id,
              "attempt": attempt, "dependency": dependency[:MAX_NAME_CHARS]}
    events = [_event(base, span, "attempt_started", span.start_ns, **common)]
    end = {"latency_ms": _ms(span.end_ns - span.start_ns), "tokens_in": tokens_in, "tokens_out": tokens_out,
           "cost_usd": round((tokens_in * price_in + tokens_out * price_out) / 1e6, 9)}
    if not failed(span):
        events.append(_event(base, span, "attempt_succeeded", span.end_ns, **common, **end))
        return events
    error_type, status = classify(span)
    events.append(_event(
        base, span, "attempt_failed", span.end_ns, **common, **end, error_type=error_type.value,
        retryable=error_type in TRANSIENT_ERROR_TYPES,
        error_detail={"message": (span.exception_message or span.status_message)[:2000],
                      "code": (span.exception_type or str(a.get("error.type", "")))[:MAX_NAME_CHARS], "status": status}))
    if following is not None:
        gap = _ms(following.start_ns - span.end_ns)
        events.append(_event(base, span, "decision", span.end_ns, **common, decision="retry_backoff",
                             backoff_ms=gap, decision_reason=f"{INFERRED}: invoked again {gap} ms later"))
    elif root is not None and root.end_ns:
        events.append(_event(base, span, "decision", span.end_ns, **common, decision="give_up",
                             decision_reason=f"{INFERRED}: no further attempt before the trace ended"))
    return events


def classify(span: Span) -> tuple[ErrorType, int | None]:
    """The failure class of an errored span, and its HTTP status when it has one."""
    a = span.attrs
    code = _status(span)
    if code is None and str(a.get("error.type", "")).isdigit() and int(a["error.type"]) <= 999:
        code = int(a["error.type"])
    text = f"{a.get('error.type', '')} {span.exception_type} {span.exception_message} {span.status_message}".lower()
    if code in (429, 529) or "ratelimit" in text.replace("_", "").replace(" ", "") or "429" in text:
        return ErrorType.RATE_LIMIT, code
    if code in (408, 504) or "timeout" in text or "timed out" in text:
        return ErrorType.TIMEOUT, code
    if code is not None and code >= 500:
        return ErrorType.SERVER_ERROR, code
    if "connect" in text or "network" in text:
        return ErrorType.NETWORK, code
    if "context_length" in text or "context length" in text:
        return ErrorType.CONTEXT_OVERFLOW, code
    if code in (400, 422) or "validation" in text or "parse" in text or "json" in text:
        return ErrorType.VALIDATION, code
    if a.get("gen_ai.operation.name") == "execute_tool" or a.get("openinference.span.kind") == "TOOL":
        return ErrorType.TOOL_ERROR, code
    return ErrorType.UNKNOWN, code


def _event(base: dict[str, Any], span: Span, kind: str, ts_ns: int, **fields: Any) -> dict[str, Any]:
    from datetime import UTC, datetime

    event_id = uuid.uuid5(NAMESPACE, f"{span.trace_id}/{span.span_id}/{kind}")
    ts = datetime.fromtimestamp(ts_ns // 1_000_000 / 1000, UTC).isoformat().replace("+00:00", "Z")
    return {**base, "event_id": str(event_id), "ts": ts, "kind": kind, **fields, "_ns": ts_ns}


def _ms(nanos: int) -> int:
    return max(0, nanos // 1_000_000)


def _int(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def _project(who: Principal, request: Request, spans: list[Span]) -> str:
    """The key's project; a key for several projects (or the local token) names one."""
    named = request.headers.get(PROJECT_HEADER) or next(
        (str(s.resource["retrylens.project"]) for s in spans if s.resource.get("retrylens.project")), None)
    if who.projects is not None and len(who.projects) == 1 and named is None:
        return next(iter(who.projects))
    if named is None:
        raise HTTPException(400, "this key may write several projects: name one in the X-RetryLens-Project "
                                 "header or the retrylens.project resource attribute")
    if not who.can_read(named):
        raise HTTPException(404, f"project {named!r} not found")
    return named


def ingest_spans(request: Request, who: Principal, project: str, spans: list[Span]) -> dict[str, Any]:
    """Map, judge and deliver ``project``'s spans; returns how many events were sent and what was rejected."""
    book: TraceBook = request.app.state.otlp_book
    prices = {model: (float(p[0]), float(p[1])) for model, p in request.app.state.settings.otlp_prices.items()}
    items: list[dict[str, Any]] = []
    marks: list[tuple[set[str], list[str]]] = []
    for trace_id, trace_spans, sent in book.merge(project, spans):
        new = [e for e in trace_events(trace_id, trace_spans, project, prices) if e["event_id"] not in sent]
        items.extend(new)
        marks.append((sent, [e["event_id"] for e in new]))
    accepted, rejected = judge(items, who)
    intake: EventIntake = request.app.state.intake
    try:
        intake.deliver(accepted)
    except IntakeUnavailable as exc:
        raise HTTPException(503, str(exc)) from exc
    for sent, ids in marks:
        book.mark_sent(sent, ids)
    return {"events": len(accepted), "rejected": [r.model_dump() for r in rejected]}


_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "Accepted: an OTLP ExportTraceServiceResponse (protobuf or JSON, as sent).",
          "content": {JSON: {"schema": {"type": "object"}},
                      PROTOBUF: {"schema": {"type": "string", "format": "binary"}}}},
    400: {"description": "Not an OTLP trace export (or no project named for a multi-project key)."},
    413: {"description": "The body, or the body once inflated, is over the server's limit; send smaller batches."},
    404: {"description": "The named project is not one this key may write."},
    415: {"description": "Content type or encoding other than protobuf/JSON, gzip/none."},
    503: {"description": "The broker or spool could not take the events; re-send the batch."},
}
_BODY = {"requestBody": {"required": True, "content": {
    PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
    JSON: {"schema": {"type": "object", "description": "OTLP/JSON ExportTraceServiceRequest"}}}}}


@router.post("/traces", summary="Ingest OTLP/HTTP traces (GenAI spans become inferred retry events)",
             responses=_RESPONSES, openapi_extra=_BODY, response_class=Response)
async def ingest_traces(request: Request, who: Principal = Depends(principal)) -> Response:
    body = await request.body()
    content_type = request.headers.get("content-type", "")
    cost: CostBudget | None = request.app.state.cost_budget
    # inflating and parsing hold the interpreter for as long as the body asks: in the worker process
    parsed = await in_worker(measured, kept_spans, body, content_type, request.headers.get("content-encoding", ""),
                             request.app.state.settings.api_max_inflated_bytes)
    try:
        spans = _spans(parsed)
        project = _project(who, request, spans) if spans else None
    except HTTPException:
        if cost is not None:  # the work was done on the key's behalf, its project not known
            cost.charge(payers(who.projects, request.headers.get(PROJECT_HEADER)), parsed.cpu_s)
        raise
    if project is None:
        return _answer(content_type, {"events": 0, "rejected": []})
    # mapping and judging hold the interpreter per event: off the event loop, one export at a time
    done = await on_intake_thread(measured, ingest_spans, request, who, project, spans)
    if cost is not None and who.projects is not None:
        cost.charge({project}, parsed.cpu_s + done.cpu_s)
    return _answer(content_type, done.result())


def _spans(parsed: Measured[list[Span]]) -> list[Span]:
    """The parsed spans, or the HTTP error the body's fault answers."""
    try:
        return parsed.result()
    except OtlpUnsupported as exc:
        raise HTTPException(415, str(exc)) from exc
    except OtlpTooLarge as exc:
        raise HTTPException(413, str(exc)) from exc
    except OtlpDecodeError as exc:
        raise HTTPException(400, str(exc)) from exc


def _answer(content_type: str, result: dict[str, Any]) -> Response:
    rejected = len(result["rejected"])
    if content_type.split(";")[0].strip().lower() == PROTOBUF:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceResponse,
        )

        answer = ExportTraceServiceResponse()
        if rejected:
            answer.partial_success.error_message = f"{rejected} inferred events were rejected"
        return Response(answer.SerializeToString(), media_type=PROTOBUF)
    partial = {"partialSuccess": {"errorMessage": f"{rejected} inferred events were rejected"}} if rejected else {}
    return JSONResponse({**partial, "retrylens": result})
