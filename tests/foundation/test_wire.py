"""The consumer's fast decoder agrees with the pydantic model it mirrors.

One-sided contract: whatever the fast decoder accepts, pydantic accepts with the same
values and types (so the stored row is the same); what it declines, pydantic judges.
Checked on full-featured events, on every field's boundary values (read off the model's
JSON Schema, so a new field is probed without editing this file) and, differentially, on
thousands of mutated payloads. ``test_wire_contract.py`` holds the structs to the model.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import msgspec
import orjson
import pytest
from factories import make_event
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from retrylens.ingest.processor import InvalidMessage, SourceRef, ValidEvent, process
from retrylens.schemas import RetryEvent, wire
from retrylens.schemas.wire import WireEvent, decode_wire
from retrylens.store.event_table import EVENT_COLUMN_NAMES, event_row

SOURCE = SourceRef("events", 0, 7)
INGESTED_AT = EVENT_COLUMN_NAMES.index("ingested_at")


def _rich_event() -> RetryEvent:
    """Every optional part filled in, so every generated field is exercised."""
    return make_event(
        kind="attempt_failed",
        attempt=2,
        parent_task_id="parent-1",
        trace_id="a" * 32,
        span_id="b" * 16,
        parent_span_id="c" * 16,
        phase="planning",
        dependency="gpt-4o",
        error_type="schema_mismatch",
        retryable=True,
        error_detail={"message": "missing field 'total'", "code": "E42", "status": 422, "stack_digest": "d" * 16},
        input_fingerprint="e" * 32,
        input_features={"n_chars": 812, "ratio": 0.25, "language": "en", "kw:refund": True},
        context_snapshot={
            "message_count": 3,
            "token_count": 900,
            "message_digests": ["f" * 16, "0" * 16],
            "last_messages": [{"role": "user", "content": "refund order 7 — ünïcode"}],
            "pollution_score": 0.5,
            "is_delta": True,
        },
        side_effects=[{"tool": "refund", "idempotency_key": "k-1", "status": "committed", "rollback": "void"}],
        decision="rebuild_context",
        decision_reason="schema mismatch: name the field",
        backoff_ms=750,
        policy_id="default",
        policy_version="v3",
        shadow=True,
        shadow_decision="retry_backoff",
        propensity=0.9,
        degraded=True,
        tokens_in=2100,
        tokens_out=120,
        cost_usd=0.0123,
        latency_ms=30_000,
    )


def _strip(row: list[Any]) -> list[Any]:
    return row[:INGESTED_AT] + row[INGESTED_AT + 1 :]


def _rows_agree(payload: bytes, wire: Any) -> None:
    model = RetryEvent.model_validate_json(payload)  # must not raise: the contract
    # A missing event_id or ts is filled by the model's factories (a fresh uuid4, now):
    # equal by construction, not by value, so compare the rest.
    missing = {"event_id", "ts"} - set(orjson.loads(payload))
    model = model.model_copy(update={name: getattr(wire, name) for name in missing})
    assert msgspec.to_builtins(wire) == model.model_dump(mode="json")
    _same_values_and_types(wire, model, "event")
    try:
        model_row = event_row(model, topic="t", partition=0, offset=1)
    except TypeError as exc:  # a row-builder defect, see the xfail tests below: same for both
        with pytest.raises(type(exc)):
            event_row(wire, topic="t", partition=0, offset=1)
        return
    wire_row = event_row(wire, topic="t", partition=0, offset=1)
    assert _strip(wire_row) == _strip(model_row)


def _same_values_and_types(wire: Any, model: Any, where: str) -> None:
    """Field by field: enum members, UUIDs, UTC datetimes, ints vs floats, nested parts."""
    if isinstance(model, BaseModel):
        assert isinstance(wire, msgspec.Struct), where
        assert wire.__struct_fields__ == tuple(type(model).model_fields), where
        for name in wire.__struct_fields__:
            _same_values_and_types(getattr(wire, name), getattr(model, name), f"{where}.{name}")
    elif isinstance(model, list | dict):
        assert type(wire) is type(model) and len(wire) == len(model), where
        pairs = zip(wire, model, strict=True) if isinstance(model, list) else (
            (wire[key], value) for key, value in model.items()
        )
        for index, (left, right) in enumerate(pairs):
            _same_values_and_types(left, right, f"{where}[{index}]")
    else:
        assert type(wire) is type(model) and wire == model, f"{where}: {wire!r} != {model!r}"
        if isinstance(model, datetime):
            assert wire.utcoffset() == model.utcoffset() == timedelta(0), where


def test_the_wire_struct_has_the_models_fields_in_order() -> None:
    assert WireEvent.__struct_fields__ == tuple(RetryEvent.model_fields)


@pytest.mark.parametrize(
    "event",
    [_rich_event(), make_event(), make_event(kind="task_finished", outcome="handed_off")],
    ids=["every-part", "minimal", "task-finished"],
)
def test_valid_events_decode_to_the_same_values_and_rows(event: RetryEvent) -> None:
    payload = event.to_json_bytes()
    wire = decode_wire(payload)
    assert wire is not None, "the fast path must take events our own emitters write"
    _rows_agree(payload, wire)


def test_defaults_come_from_the_models_factories() -> None:
    body = orjson.loads(make_event().to_json_bytes())
    del body["event_id"], body["ts"]
    wire = decode_wire(orjson.dumps(body))
    assert wire is not None
    assert wire.event_id.version == 4
    assert wire.ts.tzinfo is not None and wire.ts.microsecond % 1000 == 0


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"attempt": "3"}, "lax string for an int: pydantic decides"),
        ({"ts": "2026-11-01 12:00:00+00:00"}, "not RFC 3339 with a T"),
        ({"ts": 1_793_620_800}, "unix seconds"),
        ({"ts": "2026-11-01T12:00:00.1234567Z"}, "more than microsecond digits"),
        ({"event_id": "A1B2C3D4E5F60718293A4B5C6D7E8F90"}, "uppercase, no hyphens"),
        ({"cost_usd": 1.0}, "plain float, fine (control)"),
    ],
)
def test_unusual_but_valid_input_is_never_rejected(change: dict[str, Any], why: str) -> None:
    body = orjson.loads(make_event().to_json_bytes()) | change
    raw = orjson.dumps(body)
    outcome = process(raw, SOURCE)
    assert isinstance(outcome, ValidEvent), why
    assert _strip(outcome.row) == _strip(event_row(RetryEvent.model_validate_json(raw), topic="events", partition=0, offset=7))


@pytest.mark.parametrize(
    "change",
    [
        {"task_id": "task\n"},  # Python's $ would match before the newline; pydantic's does not
        {"trace_id": "a" * 32 + "\n"},
        {"event_id": None},
        {"cost_usd": 1e308 * 10},
        {"kind": "attempt_failed"},  # attempt_failed without an error_type
        {"shadow": True},  # shadow without a shadow_decision
        {"surprise": 1},
    ],
)
def test_invalid_input_is_left_to_pydantic(change: dict[str, Any]) -> None:
    body = orjson.loads(make_event().to_json_bytes()) | change
    raw = json.dumps(body).encode()
    assert decode_wire(raw) is None
    with pytest.raises(ValidationError):
        RetryEvent.model_validate_json(raw)
    assert isinstance(process(raw, SOURCE), InvalidMessage)


# --- differential: mutate valid payloads at random, the contract must hold -----------------

_LEAF_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, 999, 1000, 10_000, 86_400_000, 86_400_001, 2**32, 2**63, -1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1.0, 1.5, 1e308, -0.0, 5e-324]),
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            "a" * 16,
            "a" * 32,
            "a" * 64,
            "A" * 32,
            "x\n",
            "\x00",
            "a" * 300,
            "timeout",
            "retry_backoff",
            "succeeded",
            "committed",
            "attempt_failed",
            "2026-11-01T12:00:00Z",
            "2026-11-01T12:00:00.5+02:00",
            "2026-13-01T12:00:00Z",
            "2026-11-01T24:00:00Z",
            "3f2c7c3e-6a4e-4c55-9f43-2f1f4a1f9a10",
        ]
    ),
)
_VALUES = st.recursive(
    _LEAF_VALUES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=12), inner, max_size=3)),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


_STARTS = [_rich_event().to_json_bytes(), make_event().to_json_bytes()]
#: Every key of a full event, with its value there: "add" also grows a minimal event's parts.
_KNOWN: dict[str, Any] = {}


def _collect_known(value: Any) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _KNOWN.setdefault(key, item)
            _collect_known(item)
    elif isinstance(value, list):
        for item in value:
            _collect_known(item)


_collect_known(orjson.loads(_STARTS[0]))


@st.composite
def _mutated_payloads(draw: st.DrawFn) -> bytes:
    body = orjson.loads(draw(st.sampled_from(_STARTS)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(body)))
        *parents, last = path
        holder = body
        for step in parents:
            holder = holder[step]
        action = draw(st.sampled_from(["set", "set", "set", "delete", "add"]))
        if action == "delete" and isinstance(holder, dict):
            del holder[last]
        elif action == "add" and isinstance(holder, dict):
            key = draw(st.one_of(st.text(min_size=1, max_size=8), st.sampled_from(sorted(_KNOWN))))
            known = _KNOWN.get(key)
            holder[key] = orjson.loads(orjson.dumps(known)) if draw(st.booleans()) else draw(_VALUES)
        elif draw(st.booleans()):
            holder[last] = draw(_same_kind(holder[last]))  # plausible edits reach the accept side
        else:
            holder[last] = draw(_VALUES)
    return json.dumps(body).encode()


def _same_kind(value: Any) -> st.SearchStrategy[Any]:
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.one_of(st.integers(-5, 2**33), st.sampled_from([0, 999, 1000, 10_000, 86_400_000, 2**63 - 1]))
    if isinstance(value, float):
        return st.floats(min_value=-1.0, max_value=2.0)
    if isinstance(value, str):
        return st.one_of(st.text(max_size=20), _LEAF_VALUES.filter(lambda v: isinstance(v, str)))
    return _VALUES


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated_payloads())
def test_whatever_the_fast_decoder_accepts_pydantic_accepts_with_the_same_row(raw: bytes) -> None:
    wire = decode_wire(raw)
    if wire is not None:
        _rows_agree(raw, wire)
    try:
        outcome = process(raw, SOURCE)
    except (TypeError, OverflowError):
        return  # the processor's own defects (xfail tests below), not the fast path's
    try:
        RetryEvent.model_validate_json(raw)
    except ValidationError:
        assert isinstance(outcome, InvalidMessage)
    else:
        on_the_wire = b'"schema_version"' in raw  # the processor also wants it spelled out
        assert isinstance(outcome, ValidEvent if on_the_wire else InvalidMessage)


# --- schema-directed: every field's boundary values, read off the model's JSON Schema -----

_SCHEMA = RetryEvent.model_json_schema(mode="validation")
_OVERFLOW = "__1e400__"  # stands for a JSON number too large for a double
_TIMESTAMPS = [
    "2026-11-01T12:00:00Z",
    "2026-11-01T12:00:00.5Z",
    "2026-11-01T12:00:00.999999+05:30",
    "2026-11-01T12:00:00.9999995Z",
    "2026-11-01T12:00:00-00:00",
    "2026-11-01T12:00:00+23:59",
    "2026-11-01T12:00:00+24:00",
    "2026-11-01T12:00:00+0530",
    "2026-11-01t12:00:00z",
    "2026-11-01T12:00:00",
    "2026-11-01T12:00Z",
    "2026-11-01",
    "2026-02-29T12:00:00Z",
    "2028-02-29T12:00:00Z",
    "2026-11-01T23:59:60Z",
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+01:00",  # no UTC equivalent
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:59-01:00",  # no UTC equivalent
    "2026-11-01T12:00:00Z\n",
]
_UUIDS = [
    "3f2c7c3e-6a4e-4c55-9f43-2f1f4a1f9a10",
    "3F2C7C3E-6A4E-4C55-9F43-2F1F4A1F9A10",
    "3f2c7c3e6a4e4c559f432f1f4a1f9a10",
    "{3f2c7c3e-6a4e-4c55-9f43-2f1f4a1f9a10}",
    "urn:uuid:3f2c7c3e-6a4e-4c55-9f43-2f1f4a1f9a10",
    "00000000-0000-0000-0000-000000000000",
    "3f2c7c3e-6a4e-1c55-9f43-2f1f4a1f9a10",
    "3f2c7c3e-6a4e-4c55-9f43-2f1f4a1f9a1",
    "3f2c7c3e-6a4e-4c55-9f43-2f1f4a1f9a10\n",
]
_GENERIC = [None, True, False, 0, 1, -1, 0.5, "", "x", [], {}]


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    node = dict(node)
    if "$ref" in node:
        node = {**_SCHEMA["$defs"][node.pop("$ref").rsplit("/", 1)[-1]], **node}
    if len(node.get("allOf", ())) == 1:
        node = {**_resolve(node.pop("allOf")[0]), **node}
    return node


def _members(node: dict[str, Any]) -> list[dict[str, Any]]:
    node = _resolve(node)
    return [_resolve(member) for member in node.get("anyOf", [node])]


def _field_paths(node: dict[str, Any], value: Any, path: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Every (path, schema members) in a full event, nested parts and items included."""
    members = _members(node)
    out = [(path, members)] if path else []
    for member in members:
        if isinstance(value, dict) and "properties" in member:
            for name, sub in member["properties"].items():
                out += _field_paths(sub, value[name], (*path, name))
        elif isinstance(value, dict) and isinstance(member.get("additionalProperties"), dict):
            for key, item in value.items():
                out += _field_paths(member["additionalProperties"], item, (*path, key))
        elif isinstance(value, list) and "items" in member:
            for index, item in enumerate(value):
                out += _field_paths(member["items"], item, (*path, index))
    return out


def _candidates(members: list[dict[str, Any]], current: Any) -> list[Any]:
    out: list[Any] = list(_GENERIC)
    for member in members:
        kind = member.get("type")
        for value in member.get("enum", [member["const"]] if "const" in member else []):
            out += [value, str(value).upper(), f" {value}", f"{value}\n", str(value)]
            if isinstance(value, int):
                out += [value + 1, float(value), True]
        if kind == "string":
            base = current if isinstance(current, str) and current else "a"
            out += [f"{base}\n", f"\n{base}", f" {base} ", base.upper(), f"{base}\x00"]
            out += [f"{base}\x1f", f"{base}\x7f", base[:-1], base * 2, f"{base}\u2028"]
            low, high = member.get("minLength", 0), member.get("maxLength")
            for n in {low - 1, low, low + 1} | ({high - 1, high, high + 1} if high else set()):
                if n >= 0:
                    out += ["a" * n, "é" * n, "\U0001f600" * n]
            out += _TIMESTAMPS if member.get("format") == "date-time" else []
            out += _UUIDS if member.get("format") == "uuid" else []
        if kind in ("integer", "number"):
            for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                if key in member:
                    bound = member[key]
                    out += [bound, bound - 1, bound + 1, float(bound), -float(bound)]
                    out += [bound - 1e-9, bound + 1e-9] if kind == "number" else [bound + 0.5]
            out += [2**31, 2**32, 2**63 - 1, 2**63, 2**64, 10**30, -(2**63) - 1, 1.0, 1e308, -0.0]
            out += [5e-324, _OVERFLOW, "1", "1.0"]
        if kind == "boolean":
            out += [0, 1, "true", "false", 1.0]
        if kind == "array" and isinstance(current, list) and current and "maxItems" in member:
            out += [[current[0]] * member["maxItems"], [current[0]] * (member["maxItems"] + 1)]
        if kind == "object" and "maxProperties" in member:
            limit = member["maxProperties"]
            out += [{f"k{i}": i for i in range(limit)}, {f"k{i}": i for i in range(limit + 1)}]
    seen: dict[str, Any] = {}
    for value in out:
        seen.setdefault(f"{type(value).__name__}:{json.dumps(value)}", value)
    return list(seen.values())


_FULL = orjson.loads(_rich_event().to_json_bytes())
_FIELD_PATHS = _field_paths(_SCHEMA, _FULL, ())


def _with(path: tuple[Any, ...], value: Any, *, delete: bool = False) -> bytes:
    body = orjson.loads(orjson.dumps(_FULL))
    holder = body
    for step in path[:-1]:
        holder = holder[step]
    if delete:
        del holder[path[-1]]
    else:
        holder[path[-1]] = value
    return json.dumps(body).replace(f'"{_OVERFLOW}"', "1e400").encode()


@pytest.mark.parametrize(
    ("path", "members"), _FIELD_PATHS, ids=[".".join(map(str, p)) for p, _ in _FIELD_PATHS]
)
def test_every_fields_boundary_values_keep_the_contract(
    path: tuple[Any, ...], members: list[dict[str, Any]]
) -> None:
    current = _FULL
    for step in path:
        current = current[step]
    payloads = [_with(path, value) for value in _candidates(members, current) if value != current]
    if not isinstance(path[-1], int):
        payloads.append(_with(path, None, delete=True))
    accepted = 0
    for raw in [_with(path, current), *payloads]:
        wire = decode_wire(raw)
        if wire is not None:
            accepted += 1
            _rows_agree(raw, wire)
    leaf = not isinstance(current, dict | list)
    assert accepted > leaf, "no variant reached the fast path: the probe is vacuous here"


def test_the_boundary_probe_covers_every_field_of_every_part() -> None:
    named = {".".join(str(s) for s in p if not isinstance(s, int)) for p, _ in _FIELD_PATHS}
    for name, sub in _SCHEMA["properties"].items():
        assert name in named
        for member in _members(sub):
            for inner in member.get("properties", {}):
                assert f"{name}.{inner}" in named
            for inner in _resolve(member.get("items", {})).get("properties", {}):
                assert f"{name}.{inner}" in named


@pytest.mark.parametrize("key", [*RetryEvent.model_fields, "agent.name", "context_snapshot.message_count"])
def test_a_repeated_key_is_read_as_pydantic_reads_it(key: str) -> None:
    """JSON objects may repeat a key; both decoders must keep the same (last) one."""
    *parents, name = key.split(".")
    for first, last in [("@", None), (None, "@"), ("@", -1), (-1, "@"), ("@", "x\n"), ("@", {})]:
        body = orjson.loads(orjson.dumps(_FULL))
        holder = body
        for step in parents:
            holder = holder[step]
        original = holder.pop(name)
        text = json.dumps(holder)
        def pick(value: Any, original: Any = original) -> str:
            return json.dumps(original if value == "@" else value)

        repeated = (
            text[:-1]
            + ("" if text == "{}" else ", ")
            + f'"{name}": {pick(first)}, "{name}": {pick(last)}}}'
        )
        if parents:
            holder.clear()
            holder["__hole__"] = 0
            raw = json.dumps(body).replace('{"__hole__": 0}', repeated).encode()
        else:
            raw = repeated.encode()
        wire = decode_wire(raw)
        if wire is not None:
            _rows_agree(raw, wire)


@pytest.mark.parametrize("raw_value", ['"\\ud800"', '"a\\udc00b"', '"\\ud83d\\ude00"'])
def test_escaped_surrogates_keep_the_contract(raw_value: str) -> None:
    raw = json.dumps(_FULL).replace('"task-1"', raw_value, 1).encode()
    assert raw != json.dumps(_FULL).encode()
    wire = decode_wire(raw)
    if wire is not None:
        _rows_agree(raw, wire)


@pytest.mark.parametrize("ts", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_timestamp_without_a_utc_equivalent_is_declined_not_raised(ts: str) -> None:
    assert decode_wire(_with(("ts",), ts)) is None


def test_the_processor_dead_letters_a_timestamp_without_a_utc_equivalent() -> None:
    outcome = process(_with(("ts",), "0001-01-01T00:00:00+01:00"), SOURCE)
    assert isinstance(outcome, InvalidMessage)


def test_the_processor_dead_letters_a_snapshot_count_past_the_stored_range() -> None:
    raw = json.dumps(orjson.loads(make_event().to_json_bytes()) | {"context_snapshot": {"message_count": 2**64}})
    assert isinstance(process(raw.encode(), SOURCE), InvalidMessage)


def test_a_feature_integer_past_64_bits_is_kept_as_a_float_not_a_crash() -> None:
    raw = json.dumps(orjson.loads(make_event().to_json_bytes()) | {"input_features": {"n": 2**64}})
    outcome = process(raw.encode(), SOURCE)
    assert isinstance(outcome, ValidEvent)
    assert outcome.event.input_features["n"] == float(2**64)


# --- the decoder checks WireEvent's patterns without regexes: same verdicts ----------------

_PATTERN_PROBES = st.one_of(
    st.text(max_size=70),
    st.text(alphabet="0123456789abcdefABCDEFgx\n\x00\x1f\x7f٣", max_size=70),
    st.sampled_from(
        ["", "a" * 15, "a" * 16, "a" * 17, "a" * 31, "a" * 32, "a" * 33, "a" * 64, "a" * 65, "0" * 16 + "\n",
         "A" * 16, "٣" * 16, "x\x1f", "\x1f", " ", "\x7f", "é", "\u2028", "ok"]
    ),
)


@settings(max_examples=400, deadline=None)
@given(value=_PATTERN_PROBES)
def test_each_patterns_fast_check_accepts_exactly_what_its_regex_accepts(value: str) -> None:
    for pattern, check in wire._PATTERN_CHECKS.items():
        assert check(value) == (re.search(pattern, value) is not None), (pattern, value)


_HEX_PATHS = {
    ("trace_id",): r"\A[0-9a-f]{32}\Z",
    ("span_id",): r"\A[0-9a-f]{16}\Z",
    ("parent_span_id",): r"\A[0-9a-f]{16}\Z",
    ("input_fingerprint",): r"\A[0-9a-f]{16,64}\Z",
    ("error_detail", "stack_digest"): r"\A[0-9a-f]{16,64}\Z",
    ("context_snapshot", "message_digests", 0): r"\A[0-9a-f]{16,64}\Z",
    ("context_snapshot", "message_digests", 1): r"\A[0-9a-f]{16,64}\Z",
}


@settings(max_examples=300, deadline=None)
@given(value=_PATTERN_PROBES, path=st.sampled_from(sorted(_HEX_PATHS, key=str)))
def test_the_decoder_accepts_a_hex_field_exactly_when_its_pattern_holds(value: str, path: tuple[Any, ...]) -> None:
    """The hex fields' lengths are checked one by one and their characters in one pass over
    their concatenation: a bad character or length in any one of them is still refused."""
    assert (decode_wire(_with(path, value)) is not None) == (re.search(_HEX_PATHS[path], value) is not None)


@pytest.mark.parametrize("path", sorted(_HEX_PATHS, key=str))
@pytest.mark.parametrize("escaped", ["\\ud800", "\\udc00" * 16, "0" * 15 + "\\ud83d\\ude00", "\\u0661" * 16])
def test_a_hex_field_with_an_escaped_surrogate_or_foreign_digit_is_refused_not_raised(
    escaped: str, path: tuple[Any, ...]
) -> None:
    """The hex check deletes the hex digits from the fields' bytes: a non-ASCII digit, a
    surrogate pair or a lone surrogate (which strict UTF-8 cannot encode) must be a refusal,
    never an exception, whichever step refuses it."""
    raw = _with(path, "PLACEHOLDER").replace(b"PLACEHOLDER", escaped.encode())
    assert decode_wire(raw) is None
    assert isinstance(process(raw, SOURCE), InvalidMessage)


@pytest.mark.parametrize(
    "ts",
    ["2026-12-06T17:10:50.840000Z", "2026-12-06T17:10:50.840Z", "2026-12-06T17:10:50Z", "2026-12-06T17:10:50.840123Z",
     "2026-12-06T17:10:50.840+00:00", "2026-12-06T17:10:50.840-00:00", "2026-12-06T18:10:50.840999+01:00",
     "2026-12-06T17:10:50.1Z"],
)
def test_the_decoders_timestamp_is_the_models_utc_millisecond(ts: str) -> None:
    raw = _with(("ts",), ts)
    decoded, model = decode_wire(raw), RetryEvent.model_validate_json(raw)
    assert decoded is not None
    assert decoded.ts == model.ts and decoded.ts.tzinfo is model.ts.tzinfo and decoded.ts.microsecond % 1000 == 0


_IDENTIFIER_PATHS = [("project",), ("task_id",), ("correlation_id",), ("parent_task_id",),
                     ("side_effects", 0, "idempotency_key")]


@pytest.mark.parametrize("path", _IDENTIFIER_PATHS, ids=lambda p: ".".join(map(str, p)))
@pytest.mark.parametrize("control", ["\x00", "\x01", "\n", "\t", "\x1f"])
def test_an_escaped_control_character_in_any_identifier_is_declined_and_dead_lettered(
    path: tuple[Any, ...], control: str
) -> None:
    raw = _with(path, "id" + control + "x")
    assert b"\\" in raw
    assert decode_wire(raw) is None
    outcome = process(raw, SOURCE)
    assert isinstance(outcome, InvalidMessage) and outcome.reason == "invalid_fields"


def test_an_escaped_character_that_is_no_control_keeps_an_identifier_valid() -> None:
    raw = _with(("task_id",), 'task "quoted" \\ é\u2028\x7f')
    assert b"\\" in raw
    wire_event = decode_wire(raw)
    assert wire_event is not None and wire_event.task_id == 'task "quoted" \\ é\u2028\x7f'
    _rows_agree(raw, wire_event)


def test_every_pattern_of_the_wire_struct_is_checked_by_the_decoder() -> None:
    declared: dict[tuple[str, str], str] = {}
    for struct in (wire.WireEvent, wire.WireAgentRef, wire.WireErrorDetail, wire.WireContextSnapshot,
                   wire.WireContextMessage, wire.WireSideEffect):
        for name, field in msgspec.json.schema_components([struct])[1].get(struct.__name__, {}).get(
            "properties", {}
        ).items():
            for found in re.findall(r"'pattern': '((?:[^'\\]|\\.)*)'", repr(field)):
                if found.encode().decode("unicode_escape") != wire.RFC3339_PATTERN:
                    declared[(struct.__name__, name)] = found.encode().decode("unicode_escape")
    assert declared == wire._CHECKED
