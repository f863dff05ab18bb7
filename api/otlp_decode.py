"""OTLP/HTTP trace payloads (protobuf or JSON) → flat :class:`Span` records.

Both encodings of ``ExportTraceServiceRequest`` land in the same small dataclass so the
mapping onto retry events (:mod:`.otlp`) does not care which one the exporter chose.
Protobuf needs ``opentelemetry-proto`` (the ``otlp`` extra), imported on first use; JSON
follows the OTLP/JSON rules (hex trace and span ids, lowerCamelCase keys, 64-bit integers
as strings). Anything that is not a well-formed request raises :class:`OtlpDecodeError`,
which the route turns into a 400.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from retrylens.errors import OtlpDecodeError, OtlpTooLarge, OtlpUnsupported

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_HEX = frozenset("0123456789abcdef")
LATEST_NS = 7_258_118_400 * 10**9  # 2200-01-01, the store's latest time
#: Inflated bytes produced per step: memory and time past the limit are at most this.
INFLATE_STEP = 64 * 1024
#: zlib window bits: gzip (a header and trailer) or zlib (deflate as HTTP sends it)
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


@dataclass(slots=True)
class Span:
    """One span with what the retry mapping reads; ``error`` is status code ERROR, ``ok`` is OK
    (neither: UNSET, the span left its outcome unsaid)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attrs: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    error: bool = False
    ok: bool = False
    status_message: str = ""
    exception_type: str = ""
    exception_message: str = ""


def decode(body: bytes, content_type: str, content_encoding: str = "", *, max_inflated: int | None = None) -> list[Span]:
    """Every span of an OTLP/HTTP trace export body; a compressed body may inflate to
    ``max_inflated`` bytes at most (:class:`OtlpTooLarge` as soon as it passes them)."""
    body = inflate(body, content_encoding.strip().lower(), max_inflated)
    media = content_type.split(";")[0].strip().lower()
    if media == PROTOBUF:
        return _from_protobuf(body)
    if media == JSON:
        return _from_json(body)
    raise OtlpUnsupported(f"content type {media or '(none)'!r} is not OTLP: send {PROTOBUF} or {JSON}")


def inflate(body: bytes, encoding: str, limit: int | None = None) -> bytes:
    """``body`` decompressed, in steps of :data:`INFLATE_STEP` so that a bomb (1 MiB inflating to
    1 GiB) costs at most ``limit`` plus one step of memory and time before it is refused."""
    if encoding in ("", "identity"):
        return body
    if encoding not in _WBITS:
        raise OtlpUnsupported(f"content encoding {encoding!r} is not supported: send gzip or none")
    out = bytearray()
    rest = body
    try:
        while rest:  # a gzip body may hold several members, one after another
            inflater = zlib.decompressobj(_WBITS[encoding])
            while rest and not inflater.eof:
                out += inflater.decompress(rest, INFLATE_STEP)
                rest = inflater.unconsumed_tail
                _check(len(out), limit)
            if not inflater.eof:
                raise OtlpDecodeError(f"the body is not valid {encoding}: it ends inside the compressed stream")
            rest = inflater.unused_data if encoding == "gzip" else b""
    except zlib.error as exc:
        raise OtlpDecodeError(f"the body is not valid {encoding}: {exc}") from exc
    return bytes(out)


def _check(size: int, limit: int | None) -> None:
    if limit is not None and size > limit:
        raise OtlpTooLarge(f"the body inflates to more than {limit} bytes (api_max_inflated_bytes): send smaller "
                           "batches", limit=limit)


# -- protobuf ---------------------------------------------------------------------------
def _from_protobuf(body: bytes) -> list[Span]:
    try:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise OtlpUnsupported("protobuf OTLP needs the otlp extra (opentelemetry-proto); send JSON") from exc
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError) as exc:
        raise OtlpDecodeError(f"the body is not an OTLP ExportTraceServiceRequest: {exc}") from exc
    spans: list[Span] = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _pb_value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                if s.start_time_unix_nano >= LATEST_NS or s.end_time_unix_nano >= LATEST_NS:
                    raise OtlpDecodeError("a span time must be nanoseconds since 1970, before 2200")
                span = Span(
                    trace_id=_pb_id(s.trace_id, 16, "traceId"), span_id=_pb_id(s.span_id, 8, "spanId"),
                    parent_id=_pb_id(s.parent_span_id, 8, "parentSpanId") if s.parent_span_id else None,
                    name=s.name, start_ns=s.start_time_unix_nano, end_ns=s.end_time_unix_nano,
                    attrs={kv.key: _pb_value(kv.value) for kv in s.attributes}, resource=resource,
                    error=s.status.code == 2, ok=s.status.code == 1, status_message=s.status.message,
                )
                for event in s.events:
                    if event.name == "exception":
                        _exception(span, {kv.key: _pb_value(kv.value) for kv in event.attributes})
                spans.append(span)
    return spans


def _pb_id(raw: bytes, size: int, what: str) -> str:
    if len(raw) != size or not any(raw):
        raise OtlpDecodeError(f"{what} must be {size} bytes and not all zero")
    return raw.hex()


def _pb_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_pb_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


# -- JSON -------------------------------------------------------------------------------
def _from_json(body: bytes) -> list[Span]:
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpDecodeError(f"the body is not JSON: {exc}") from exc
    spans: list[Span] = []
    try:
        for resource_spans in _list(request, "resourceSpans"):
            resource = _attrs(_obj(resource_spans.get("resource") or {}))
            for scope_spans in _list(resource_spans, "scopeSpans"):
                for s in _list(scope_spans, "spans"):
                    spans.append(_json_span(_obj(s), resource))
    except (TypeError, ValueError, AttributeError) as exc:
        raise OtlpDecodeError(f"the body is not an OTLP/JSON trace export: {exc}") from exc
    return spans


def _json_span(s: dict[str, Any], resource: dict[str, Any]) -> Span:
    status = _obj(s.get("status") or {})
    parent = s.get("parentSpanId") or s.get("parent_span_id") or ""
    span = Span(
        trace_id=_hex_id(s.get("traceId") or s.get("trace_id"), 32, "traceId"),
        span_id=_hex_id(s.get("spanId") or s.get("span_id"), 16, "spanId"),
        parent_id=_hex_id(parent, 16, "parentSpanId") if parent else None,
        name=str(s.get("name", "")),
        start_ns=_uint(s.get("startTimeUnixNano", 0)), end_ns=_uint(s.get("endTimeUnixNano", 0)),
        attrs=_attrs(s), resource=resource,
        error=status.get("code") in (2, "2", "STATUS_CODE_ERROR"), ok=status.get("code") in (1, "1", "STATUS_CODE_OK"),
        status_message=str(status.get("message", "")),
    )
    for event in s.get("events") or []:
        event = _obj(event)
        if event.get("name") == "exception":
            _exception(span, _attrs(event))
    return span


def _obj(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


def _list(container: Any, key: str) -> list[Any]:
    found = _obj(container).get(key)
    if found is None:
        found = container.get("".join("_" + c.lower() if c.isupper() else c for c in key), [])
    if not isinstance(found, list):
        raise TypeError(f"{key} must be an array")
    return found


def _attrs(container: dict[str, Any]) -> dict[str, Any]:
    return {str(_obj(kv)["key"]): _json_value(kv.get("value") or {}) for kv in container.get("attributes") or []}


def _json_value(value: Any) -> Any:
    value = _obj(value)
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [_json_value(v) for v in _obj(value["arrayValue"]).get("values") or []]
    if "kvlistValue" in value:
        return _attrs({"attributes": _obj(value["kvlistValue"]).get("values") or []})
    return None


def _hex_id(value: Any, size: int, what: str) -> str:
    text = str(value or "").lower()
    if len(text) != size or not set(text) <= _HEX or set(text) == {"0"}:
        raise ValueError(f"{what} must be {size} hex digits and not all zero")
    return text


def _uint(value: Any) -> int:
    number = int(value)
    if not 0 <= number < LATEST_NS:
        raise ValueError("a time must be nanoseconds since 1970, before 2200")
    return number


def _exception(span: Span, attrs: dict[str, Any]) -> None:
    span.exception_type = str(attrs.get("exception.type", "") or "")
    span.exception_message = str(attrs.get("exception.message", "") or "")
