"""The hand-written wire structs and the pydantic model describe the same event.

Compared through the JSON Schema both libraries export (public, version-stable output,
unlike pydantic's field metadata): field names and order, required/optional, defaults,
bounds, anchored patterns, enum values, nested parts, unknown fields forbidden. What a
JSON Schema cannot show — model configuration, validators, non-finite floats — is held
by the other tests here, so any change to the model that the wire side does not mirror
fails one of them.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import orjson
import pytest
from factories import make_event
from pydantic import BaseModel

from retrylens.schemas import (
    AgentRef,
    ContextMessage,
    ContextSnapshot,
    ErrorDetail,
    RetryEvent,
    SideEffect,
)
from retrylens.schemas.export import SCHEMA_FILE
from retrylens.schemas.wire import (
    RFC3339_PATTERN,
    UNBOUNDED_FLOATS,
    WireAgentRef,
    WireContextMessage,
    WireContextSnapshot,
    WireErrorDetail,
    WireEvent,
    WireSideEffect,
    decode_wire,
)

PAIRS: list[tuple[type[BaseModel], type[msgspec.Struct]]] = [
    (RetryEvent, WireEvent),
    (AgentRef, WireAgentRef),
    (ErrorDetail, WireErrorDetail),
    (ContextMessage, WireContextMessage),
    (ContextSnapshot, WireContextSnapshot),
    (SideEffect, WireSideEffect),
]

#: Everything a model's class body defines besides fields and config, and how the wire
#: side mirrors it.
MIRRORED_METHODS: dict[type[BaseModel], set[str]] = {
    RetryEvent: {
        "_utc_milliseconds",  # decode_wire runs it on ts
        "_consistent",  # decode_wire runs it on the struct
        "to_json_bytes",  # serialization only
        "from_json_bytes",  # the pydantic path itself
    },
}

#: What pydantic itself puts in a model's class namespace (varies by version).
_PYDANTIC_CLASS_ATTRIBUTES = {"model_config", "model_fields", "model_computed_fields", "_abc_impl"}

_IGNORED_KEYS = {"title", "description", "$defs", "$schema", "$id", "examples"}


def _shape(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema node reduced to what validation depends on, refs inlined, so that
    two libraries' renderings of the same constraints compare equal."""
    node = dict(node)
    if "$ref" in node:
        node = {**defs[node.pop("$ref").rsplit("/", 1)[-1]], **node}
    if "allOf" in node and len(node["allOf"]) == 1:  # older pydantic: {"allOf": [ref], default}
        node = {**_shape(node.pop("allOf")[0], defs), **node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _IGNORED_KEYS:
            continue
        if key == "anyOf":
            members = [_shape(member, defs) for member in value]
            out[key] = sorted(members, key=lambda m: json.dumps(m, sort_keys=True))
        elif key == "properties":
            out[key] = {name: _shape(sub, defs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "propertyNames") and isinstance(value, dict):
            out[key] = _shape(value, defs)
        elif key == "required":
            if value:
                out[key] = sorted(value)
        elif key == "pattern":
            out[key] = re.sub(r"^\\A(.*)\\Z$", r"^\1$", value)
        else:
            out[key] = value
    if len(out.get("enum", ())) == 1:
        out["const"] = out.pop("enum")[0]
    if "enum" in out:
        out["enum"] = sorted(out["enum"])
    if "enum" in out or "const" in out:
        out.pop("type", None)  # pydantic adds it, msgspec does not; the values decide
    return out


def _model_shape(schema: dict[str, Any]) -> dict[str, Any]:
    return _shape(schema, schema.get("$defs", {}))


def _wire_shape() -> dict[str, Any]:
    schema = msgspec.json.schema(WireEvent)
    shape = _shape(schema, schema["$defs"])

    def adapt(node: Any) -> Any:
        if isinstance(node, list):
            return [adapt(item) for item in node]
        if not isinstance(node, dict):
            return node
        if node.get("pattern") == "^" + RFC3339_PATTERN[2:-2] + "$":
            # ts travels as an RFC 3339 string that decode_wire parses (a subset of
            # what pydantic's date-time accepts; the rest falls back to pydantic).
            node = {k: v for k, v in node.items() if k != "pattern"} | {"format": "date-time"}
        if node.get("default") in ([], {}):
            # msgspec shows default_factory=list/dict as a default; pydantic shows none.
            node = {k: v for k, v in node.items() if k != "default"}
        return {key: adapt(value) for key, value in node.items()}

    return adapt(shape)


def _diff(left: Any, right: Any, where: str = "") -> list[str]:
    if isinstance(left, dict) and isinstance(right, dict):
        out = []
        for key in sorted(set(left) | set(right)):
            if key not in left or key not in right:
                out.append(f"{where}.{key}: model {left.get(key)!r} / wire {right.get(key)!r}")
            else:
                out += _diff(left[key], right[key], f"{where}.{key}")
        return out
    return [] if left == right else [f"{where}: model {left!r} / wire {right!r}"]


@pytest.mark.parametrize(
    "source",
    ["model", "published file"],
)
def test_the_wire_structs_have_the_models_json_schema(source: str) -> None:
    if source == "model":
        schema = RetryEvent.model_json_schema(mode="validation")
    else:
        schema = orjson.loads(SCHEMA_FILE.read_bytes())
    model, wire = _model_shape(schema), _wire_shape()
    if "propertyNames" not in model["properties"]["input_features"]:
        # pydantic < 2.10 does not render dict key bounds; the published file (rendered
        # by the pinned pydantic) still checks them.
        del wire["properties"]["input_features"]["propertyNames"]
    differences = _diff(model, wire)
    assert not differences, "schemas/wire.py does not mirror the event:\n" + "\n".join(differences)


def test_the_comparison_sees_a_field_the_wire_side_lacks() -> None:
    """The check above is not vacuous: a model with one more field fails it."""

    class Extended(RetryEvent):
        new_field: int = 0

    differences = _diff(_model_shape(Extended.model_json_schema()), _wire_shape())
    assert (
        ".properties.new_field: model {'default': 0, 'type': 'integer'} / wire None" in differences
    )


def test_every_nested_part_has_a_twin_with_the_same_fields_in_order() -> None:
    schema = RetryEvent.model_json_schema(mode="validation")
    nested = {name for name, sub in schema["$defs"].items() if sub.get("type") == "object"}
    assert nested == {model.__name__ for model, _ in PAIRS if model is not RetryEvent}
    for model, struct in PAIRS:
        assert struct.__name__ == f"Wire{model.__name__}" or model is RetryEvent
        assert struct.__struct_fields__ == tuple(model.model_fields), model.__name__


@pytest.mark.parametrize(("model", "struct"), PAIRS, ids=[m.__name__ for m, _ in PAIRS])
def test_model_configuration_is_the_one_the_structs_mirror(
    model: type[BaseModel], struct: type[msgspec.Struct]
) -> None:
    # Options such as str_strip_whitespace or strict change validation without showing in
    # the JSON Schema; the structs mirror exactly this configuration.
    assert dict(model.model_config) == {"extra": "forbid", "frozen": True}
    assert struct.__struct_config__.forbid_unknown_fields


@pytest.mark.parametrize("model", [m for m, _ in PAIRS], ids=[m.__name__ for m, _ in PAIRS])
def test_model_logic_is_only_what_decode_wire_mirrors(model: type[BaseModel]) -> None:
    """A validator added to a model (invisible in its JSON Schema) must be mirrored first."""
    own = {
        name
        for name in vars(model)
        if not name.startswith("__") and name not in _PYDANTIC_CLASS_ATTRIBUTES
    }
    assert own == MIRRORED_METHODS.get(model, set())


def _float_fields(node: dict[str, Any], where: str) -> list[tuple[str, dict[str, Any]]]:
    """Paths to float-only values (a union that also takes integers reads ints as ints)."""
    out = []
    members = node.get("anyOf", [node])
    takes_ints = any(member.get("type") == "integer" for member in members)
    for member in members:
        if member.get("type") == "number" and not takes_ints:
            out.append((where, member))
        for name, sub in member.get("properties", {}).items():
            out += _float_fields(sub, f"{where}.{name}" if where else name)
        if isinstance(member.get("items"), dict):
            out += _float_fields(member["items"], f"{where}[]")
        if isinstance(member.get("additionalProperties"), dict):
            out += _float_fields(member["additionalProperties"], f"{where}{{}}")
    return out


def test_unbounded_floats_are_the_ones_decode_wire_guards() -> None:
    floats = _float_fields(_model_shape(RetryEvent.model_json_schema()), "")
    assert {"cost_usd", "context_snapshot.pollution_score", "propensity"} <= {w for w, _ in floats}
    unbounded = {w for w, m in floats if "maximum" not in m and "exclusiveMaximum" not in m}
    assert unbounded == set(UNBOUNDED_FLOATS)  # top-level only: decode_wire reads them by name


def _rich_body() -> dict[str, Any]:
    return orjson.loads(
        make_event(
            context_snapshot={"message_count": 1, "pollution_score": 0.5},
            propensity=0.5,
            input_features={"ratio": 0.5},
        ).to_json_bytes()
    )


def _set(body: dict[str, Any], where: str, value: Any) -> None:
    *parents, last = where.split(".")
    for step in parents:
        body = body[step]
    body[last] = value


@pytest.mark.parametrize(
    "literal",
    ["1e400", "-1e400", "NaN", "Infinity", "4611686018427387904", "18446744073709551616", "1e300"],
)
def test_a_float_the_model_may_refuse_is_never_taken_by_the_fast_path(literal: str) -> None:
    """``allow_inf_nan=False`` is not in the JSON Schema, and pydantic <= 2.11 refuses large
    JSON integers for a float: wherever a float goes, the fast path takes such a value
    only if pydantic takes it too, with the same value."""
    for where, _ in _float_fields(_model_shape(RetryEvent.model_json_schema()), ""):
        body = _rich_body()
        _set(body, where, "__float__")
        raw = orjson.dumps(body).replace(b'"__float__"', literal.encode())
        wire = decode_wire(raw)
        if wire is not None:
            model = RetryEvent.model_validate_json(raw)  # must not raise: the contract
            assert msgspec.to_builtins(wire) == model.model_dump(mode="json"), where
