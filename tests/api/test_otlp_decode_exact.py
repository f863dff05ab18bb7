"""OTLP trace bodies → spans, field by field, for both encodings (no server, no store).

The route and the mapping tests pin what is stored; these pin the decoding under them
exactly (mutation target ``otlp_decode``): the status code read (UNSET is neither OK nor
ERROR: issue 38's bug 3), ids and their validity, times up to the store's latest, every
attribute type, the exception event, and the refusals with their reasons.
"""

from __future__ import annotations

import sys

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from retrylens.api.otlp_decode import JSON, LATEST_NS, PROTOBUF, Span, decode
from retrylens.errors import OtlpDecodeError, OtlpUnsupported

TRACE = bytes(range(1, 17))
SPAN = bytes(range(17, 25))
PARENT = bytes(range(25, 33))


def _kv(key: str, value: AnyValue) -> KeyValue:
    return KeyValue(key=key, value=value)


def _pb_span(*, code: int = 0, span_id: bytes = SPAN, parent: bytes = b"", start: int = 10, end: int = 20,
             trace_id: bytes = TRACE) -> PbSpan:
    span = PbSpan(trace_id=trace_id, span_id=span_id, parent_span_id=parent, name="chat", start_time_unix_nano=start,
                  end_time_unix_nano=end, status=Status(code=code, message=f"code {code}"))
    span.attributes.extend([
        _kv("s", AnyValue(string_value="x")), _kv("b", AnyValue(bool_value=True)), _kv("i", AnyValue(int_value=7)),
        _kv("d", AnyValue(double_value=0.5)),
        _kv("a", AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1), AnyValue(string_value="two")]))),
        _kv("m", AnyValue(kvlist_value=KeyValueList(values=[_kv("k", AnyValue(bool_value=False))]))),
        _kv("none", AnyValue()),
    ])
    other = span.events.add(name="log")
    other.attributes.append(_kv("exception.type", AnyValue(string_value="NotThisOne")))
    exc = span.events.add(name="exception")
    exc.attributes.extend([_kv("exception.type", AnyValue(string_value="RateLimitError")),
                           _kv("exception.message", AnyValue(string_value="slow down"))])
    for name in ("retry", "error"):  # after the exception, names either side of it: never read
        late = span.events.add(name=name)
        late.attributes.append(_kv("exception.type", AnyValue(string_value="NorThisOne")))
    return span


def _pb_body(*spans: PbSpan, service: str = "svc") -> bytes:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(_kv("service.name", AnyValue(string_value=service)))
    rs.scope_spans.add().spans.extend(spans)
    return request.SerializeToString()


ATTRS = {"s": "x", "b": True, "i": 7, "d": 0.5, "a": [1, "two"], "m": {"k": False}, "none": None}


def test_a_protobuf_span_is_read_field_by_field() -> None:
    body = _pb_body(_pb_span(code=0), _pb_span(code=1, span_id=PARENT, parent=SPAN), _pb_span(code=2))
    spans = decode(body, "Application/X-Protobuf; charset=binary")
    assert spans[0] == Span(
        trace_id=TRACE.hex(), span_id=SPAN.hex(), parent_id=None, name="chat", start_ns=10, end_ns=20,
        attrs=ATTRS, resource={"service.name": "svc"}, error=False, ok=False, status_message="code 0",
        exception_type="RateLimitError", exception_message="slow down",
    )
    assert spans[1].parent_id == SPAN.hex() and spans[1].span_id == PARENT.hex()
    assert [(s.ok, s.error) for s in spans] == [(False, False), (True, False), (False, True)]


def test_a_status_code_the_specification_does_not_define_is_neither_ok_nor_error_in_either_encoding() -> None:
    """A newer exporter's code (protobuf enums are open: 3 parses as 3) says nothing this
    version can read: the span's outcome is left unsaid, as UNSET's is, not taken for ERROR."""
    (pb,) = decode(_pb_body(_pb_span(code=3)), PROTOBUF)
    (js,) = decode(_json_body(_json_span(status={"code": 3, "message": "code 3"})), JSON)
    assert (pb.ok, pb.error) == (js.ok, js.error) == (False, False)


def test_protobuf_without_the_otlp_extra_is_refused_as_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without opentelemetry-proto (the ``otlp`` extra) answers "send JSON", not a 500:
    the import is blocked the way Python marks a module as absent (None in sys.modules)."""
    body = _pb_body(_pb_span())
    monkeypatch.setitem(sys.modules, "opentelemetry.proto.collector.trace.v1.trace_service_pb2", None)
    with pytest.raises(OtlpUnsupported, match="protobuf OTLP needs the otlp extra"):
        decode(body, PROTOBUF)


def test_two_resources_keep_their_own_attributes_in_protobuf() -> None:
    request = ExportTraceServiceRequest()
    request.ParseFromString(_pb_body(_pb_span(), service="one") + _pb_body(_pb_span(span_id=PARENT), service="two"))
    spans = decode(request.SerializeToString(), PROTOBUF)
    assert [(s.span_id, s.resource["service.name"]) for s in spans] == [(SPAN.hex(), "one"), (PARENT.hex(), "two")]


def test_protobuf_times_run_up_to_the_stores_latest_and_ids_must_be_whole() -> None:
    assert decode(_pb_body(_pb_span(start=LATEST_NS - 1, end=LATEST_NS - 1)), PROTOBUF)[0].end_ns == LATEST_NS - 1
    for start, end in ((LATEST_NS, 1), (1, LATEST_NS), (LATEST_NS + 1, 1), (1, LATEST_NS + 1)):
        with pytest.raises(OtlpDecodeError, match="before 2200"):
            decode(_pb_body(_pb_span(start=start, end=end)), PROTOBUF)
    for bad in (dict(trace_id=TRACE[:15]), dict(trace_id=bytes(16)), dict(span_id=SPAN + b"\x01"),
                dict(span_id=bytes(8)), dict(parent=bytes(8)), dict(parent=PARENT[:7])):
        with pytest.raises(OtlpDecodeError, match="bytes and not all zero"):
            decode(_pb_body(_pb_span(**bad)), PROTOBUF)  # type: ignore[arg-type]
    with pytest.raises(OtlpDecodeError, match="not an OTLP ExportTraceServiceRequest"):
        decode(b"\xff\xff\xff", PROTOBUF)


def _json_span(**over: object) -> dict[str, object]:
    span: dict[str, object] = {
        "traceId": TRACE.hex().upper(), "spanId": SPAN.hex(), "name": "chat",
        "startTimeUnixNano": "10", "endTimeUnixNano": 20,
        "attributes": [
            {"key": "s", "value": {"stringValue": "x"}}, {"key": "b", "value": {"boolValue": True}},
            {"key": "i", "value": {"intValue": "7"}}, {"key": "d", "value": {"doubleValue": 0.5}},
            {"key": "a", "value": {"arrayValue": {"values": [{"intValue": 1}, {"stringValue": "two"}]}}},
            {"key": "m", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": False}}]}}},
            {"key": "none", "value": {}},
        ],
        "events": [
            {"name": "log", "attributes": [{"key": "exception.type", "value": {"stringValue": "NotThisOne"}}]},
            {"name": "exception", "attributes": [
                {"key": "exception.type", "value": {"stringValue": "RateLimitError"}},
                {"key": "exception.message", "value": {"stringValue": "slow down"}}]},
            {"name": "retry", "attributes": [{"key": "exception.type", "value": {"stringValue": "NorThisOne"}}]},
            {"name": "error", "attributes": [{"key": "exception.type", "value": {"stringValue": "NorThisOne"}}]},
        ],
        "status": {"code": 0, "message": "code 0"},
    }
    span.update(over)
    return span


def _json_body(*spans: dict[str, object], snake: bool = False) -> bytes:
    import orjson

    if snake:
        return orjson.dumps({"resource_spans": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "svc"}}]}, "scope_spans": [{"spans": list(spans)}]}]})
    return orjson.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "svc"}}]}, "scopeSpans": [{"spans": list(spans)}]}]})


def test_a_json_span_is_the_same_span_as_its_protobuf_twin() -> None:
    (from_json,) = decode(_json_body(_json_span()), "application/json; charset=utf-8")
    (from_pb,) = decode(_pb_body(_pb_span()), PROTOBUF)
    assert from_json == from_pb
    (snake,) = decode(_json_body(_json_span(trace_id=TRACE.hex(), span_id=SPAN.hex(), parent_span_id=PARENT.hex()),
                                 snake=True), JSON)
    assert (snake.trace_id, snake.span_id, snake.parent_id) == (TRACE.hex(), SPAN.hex(), PARENT.hex())
    assert snake.resource == {"service.name": "svc"}


@pytest.mark.parametrize(
    ("code", "ok", "error"),
    [(0, False, False), ("0", False, False), ("STATUS_CODE_UNSET", False, False), (None, False, False),
     (1, True, False), ("1", True, False), ("STATUS_CODE_OK", True, False),
     (2, False, True), ("2", False, True), ("STATUS_CODE_ERROR", False, True)],
)
def test_a_json_status_code_in_every_spelling(code: object, ok: bool, error: bool) -> None:
    (span,) = decode(_json_body(_json_span(status={"code": code, "message": "m"})), JSON)
    assert (span.ok, span.error, span.status_message) == (ok, error, "m")


def test_json_times_and_ids_are_checked_with_their_reasons() -> None:
    (last,) = decode(_json_body(_json_span(endTimeUnixNano=str(LATEST_NS - 1), startTimeUnixNano=0)), JSON)
    assert (last.start_ns, last.end_ns) == (0, LATEST_NS - 1)
    for bad in ({"endTimeUnixNano": LATEST_NS}, {"startTimeUnixNano": -1}):
        with pytest.raises(OtlpDecodeError, match="before 2200"):
            decode(_json_body(_json_span(**bad)), JSON)
    for bad in ({"traceId": TRACE.hex()[:31]}, {"traceId": "0" * 32}, {"spanId": "g" * 16},
                {"spanId": SPAN.hex() + "0"}, {"parentSpanId": "0" * 16}, {"traceId": None}):
        with pytest.raises(OtlpDecodeError, match="hex digits and not all zero"):
            decode(_json_body(_json_span(**bad)), JSON)
    (no_status,) = decode(_json_body({"traceId": TRACE.hex(), "spanId": SPAN.hex()}), JSON)
    assert (no_status.name, no_status.start_ns, no_status.end_ns, no_status.ok, no_status.error) == ("", 0, 0, False, False)
    assert (no_status.attrs, no_status.exception_type, no_status.status_message) == ({}, "", "")


def test_malformed_bodies_are_refused_with_their_reason() -> None:
    with pytest.raises(OtlpDecodeError, match="not JSON"):
        decode(b"{", JSON)
    for body, reason in ((b"[]", "expected an object, got list"), (b'{"resourceSpans": {}}', "resourceSpans must be an array"),
                         (b'{"resourceSpans": [{"scopeSpans": [{"spans": [1]}]}]}', "expected an object, got int")):
        with pytest.raises(OtlpDecodeError, match=f"not an OTLP/JSON trace export: {reason}"):
            decode(body, JSON)
    assert decode(b"{}", JSON) == []
    with pytest.raises(OtlpUnsupported, match="content type 'text/plain' is not OTLP"):
        decode(b"{}", "text/plain")
    with pytest.raises(OtlpUnsupported, match=r"content type '\(none\)' is not OTLP"):
        decode(b"{}", " ")
