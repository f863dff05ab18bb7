"""The consumer's fast decoder agrees with the pydantic model it is generated from.

One-sided contract: whatever the fast decoder accepts, pydantic accepts with the same
values (so the stored row is the same); what it declines, pydantic judges. Checked on
full-featured events and, differentially, on thousands of mutated payloads.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import orjson
import pytest
from factories import make_event
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from retrylens.ingest.processor import InvalidMessage, SourceRef, ValidEvent, process
from retrylens.schemas import RetryEvent
from retrylens.schemas.wire import UnsupportedSchemaError, WireEvent, _Generator, decode_wire
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
    wire_row = event_row(wire, topic="t", partition=0, offset=1)
    model_row = event_row(model, topic="t", partition=0, offset=1)
    assert _strip(wire_row) == _strip(model_row)


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


@st.composite
def _mutated_payloads(draw: st.DrawFn) -> bytes:
    body = orjson.loads(_rich_event().to_json_bytes())
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
            holder[draw(st.text(min_size=1, max_size=8))] = draw(_VALUES)
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
    outcome = process(raw, SOURCE)
    try:
        RetryEvent.model_validate_json(raw)
    except ValidationError:
        assert isinstance(outcome, InvalidMessage)
    else:
        on_the_wire = b'"schema_version"' in raw  # the processor also wants it spelled out
        assert isinstance(outcome, ValidEvent if on_the_wire else InvalidMessage)


# --- the generator refuses what it cannot mirror ---------------------------------------------


class _WithValidator(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str

    @field_validator("name")
    @classmethod
    def _shout(cls, value: str) -> str:
        return value.upper()


class _WithStrip(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    code: str = Field(pattern="[a-z]+")


class _Lax(BaseModel):
    name: str


@pytest.mark.parametrize("model", [_WithValidator, _WithStrip, _Lax])
def test_constructs_the_decoder_cannot_mirror_fail_loudly(model: type[BaseModel]) -> None:
    with pytest.raises(UnsupportedSchemaError):
        _Generator().struct_for(model, "")
