"""A fast decoder for the retry event, generated from the pydantic model it must agree with.

Validating every consumed message with pydantic costs about three JSON parses; the
consumer handles tens of thousands of events a second, so its common case uses a msgspec
decoder instead. The decoder is **derived** from :class:`~retrylens.schemas.RetryEvent`
(fields, defaults, bounds, patterns, enums, nested parts) rather than written beside it,
so the two cannot drift: a constraint the generator does not understand fails at import.

The contract is one-sided, and callers rely on it: if :func:`decode_wire` accepts a
payload, pydantic accepts it too and reads the same values; when it returns ``None``
(anything unusual: lax coercions such as ``"3"`` for an int, a non-RFC 3339 timestamp, an
error of any kind) the caller falls back to the pydantic model, which has the final word
and the error message. ``tests/foundation/test_wire.py`` checks this differentially on
mutated payloads.
"""

from __future__ import annotations

import math
import types
import typing
import uuid
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Literal

import annotated_types
import msgspec
from pydantic import AwareDatetime, BaseModel
from pydantic.fields import FieldInfo

from .event import RetryEvent

#: RFC 3339 with at most microsecond digits: the form every RetryLens emitter writes and
#: one that pydantic and :meth:`datetime.fromisoformat` read identically.
_RFC3339 = r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)\Z"
_KNOWN_MODEL_VALIDATORS = {"_consistent"}
_KNOWN_FIELD_VALIDATORS = {"_utc_milliseconds": ("ts",)}


class UnsupportedSchemaError(TypeError):
    """The event model uses a construct the wire decoder cannot mirror exactly."""


def _anchored(pattern: str) -> str:
    """pydantic's Rust regex ``$`` never matches before a final newline; Python's does."""
    if not (pattern.startswith("^") and pattern.endswith("$")):
        raise UnsupportedSchemaError(f"pattern {pattern!r} must be anchored with ^…$")
    return r"\A" + pattern[1:-1] + r"\Z"


def _meta(metadata: list[Any], where: str) -> tuple[msgspec.Meta | None, bool]:
    """msgspec bounds for pydantic metadata, and whether the value must be finite."""
    bounds: dict[str, Any] = {}
    finite = False
    for item in metadata:
        if isinstance(item, annotated_types.MinLen):
            bounds["min_length"] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            bounds["max_length"] = item.max_length
        elif isinstance(item, annotated_types.Ge):
            bounds["ge"] = item.ge
        elif isinstance(item, annotated_types.Le):
            bounds["le"] = item.le
        elif isinstance(item, annotated_types.Gt):
            bounds["gt"] = item.gt
        elif isinstance(item, annotated_types.Lt):
            bounds["lt"] = item.lt
        elif type(item).__name__ == "StringConstraints":
            extra = {
                k
                for k in ("strip_whitespace", "to_upper", "to_lower", "strict", "ascii_only")
                if getattr(item, k) is not None
            }
            if extra:
                raise UnsupportedSchemaError(f"{where}: StringConstraints {sorted(extra)}")
            for key in ("min_length", "max_length"):
                if getattr(item, key) is not None:
                    bounds[key] = getattr(item, key)
            if item.pattern is not None:
                bounds["pattern"] = _anchored(item.pattern)
        elif type(item).__name__ == "_PydanticGeneralMetadata" and vars(item) == {
            "allow_inf_nan": False
        }:
            finite = True
        else:
            raise UnsupportedSchemaError(f"{where}: unsupported constraint {item!r}")
    return (msgspec.Meta(**bounds) if bounds else None), finite


class _Generator:
    def __init__(self) -> None:
        self.structs: dict[type[BaseModel], type[msgspec.Struct]] = {}
        self.finite_fields: list[str] = []

    def type_for(self, annotation: Any, metadata: list[Any], where: str) -> Any:
        if typing.get_origin(annotation) is Annotated:
            base, *extra = typing.get_args(annotation)
            return self.type_for(base, [*extra, *metadata], where)
        if metadata and typing.get_origin(annotation) in (typing.Union, types.UnionType):
            # pydantic applies a field's bounds to the non-None members of an Optional.
            members = [
                arg if arg is type(None) else Annotated[arg, *metadata]
                for arg in typing.get_args(annotation)
            ]
            return self.type_for(typing.Union[tuple(members)], [], where)  # noqa: UP007
        meta, finite = _meta(metadata, where)
        if finite:
            self.finite_fields.append(where)
        inner = self._bare(annotation, where)
        return Annotated[inner, meta] if meta is not None else inner

    def _bare(self, annotation: Any, where: str) -> Any:
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            members = tuple(self.type_for(arg, [], where) for arg in typing.get_args(annotation))
            return typing.Union[members]  # noqa: UP007
        if origin is Literal:
            return annotation
        if origin is list:
            (item,) = typing.get_args(annotation)
            return list[self.type_for(item, [], f"{where}[]")]
        if origin is dict:
            key, value = typing.get_args(annotation)
            return dict[
                self.type_for(key, [], f"{where}{{}}"), self.type_for(value, [], f"{where}{{}}")
            ]
        if annotation is AwareDatetime:
            return Annotated[str, msgspec.Meta(pattern=_RFC3339)]
        if annotation in (str, int, float, bool, type(None), uuid.UUID):
            return annotation
        if isinstance(annotation, type) and issubclass(annotation, Enum):
            return annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return self.struct_for(annotation, where)
        raise UnsupportedSchemaError(f"{where}: unsupported type {annotation!r}")

    def struct_for(self, model: type[BaseModel], where: str) -> type[msgspec.Struct]:
        if model in self.structs:
            return self.structs[model]
        if model.model_config.get("extra") != "forbid":
            raise UnsupportedSchemaError(f"{model.__name__} must forbid extra fields")
        decorators = model.__pydantic_decorators__
        validators = set(decorators.model_validators) | set(decorators.field_validators)
        expected = (
            _KNOWN_MODEL_VALIDATORS | set(_KNOWN_FIELD_VALIDATORS) if model is RetryEvent else set()
        )
        if validators != expected:
            raise UnsupportedSchemaError(
                f"{model.__name__}: validators {sorted(validators)} are not mirrored"
            )
        fields = [
            self._field(name, info, f"{where}.{name}" if where else name)
            for name, info in model.model_fields.items()
        ]
        struct = msgspec.defstruct(
            f"Wire{model.__name__}",
            fields,
            kw_only=True,
            forbid_unknown_fields=True,
            module=__name__,
        )
        self.structs[model] = struct
        return struct

    def _field(self, name: str, info: FieldInfo, where: str) -> tuple[Any, ...]:
        if info.alias not in (None, name):
            raise UnsupportedSchemaError(f"{where}: aliases are not mirrored")
        kind = self.type_for(info.annotation, list(info.metadata), where)
        if info.is_required():
            return (name, kind)
        if info.default_factory in (list, dict):
            return (name, kind, msgspec.field(default_factory=info.default_factory))
        if info.default_factory is not None:
            # Filled in after decoding with pydantic's own factory (event id, clock): UNSET,
            # unlike None, keeps an explicit ``null`` an error, as it is for pydantic.
            return (name, kind | msgspec.UnsetType, msgspec.UNSET)
        return (name, kind, info.default)


_GENERATOR = _Generator()
WireEvent = _GENERATOR.struct_for(RetryEvent, "")
_FINITE_FIELDS = tuple(_GENERATOR.finite_fields)
if any("." in name or "[" in name or "{" in name for name in _FINITE_FIELDS):
    raise UnsupportedSchemaError(f"finite-only nested floats are not mirrored: {_FINITE_FIELDS}")
_FACTORY_FIELDS = tuple(
    (name, info.default_factory)
    for name, info in RetryEvent.model_fields.items()
    if info.default_factory is not None and info.default_factory not in (list, dict)
)
_DECODER = msgspec.json.Decoder(WireEvent)
_decorators = RetryEvent.__pydantic_decorators__
_CONSISTENT = _decorators.model_validators["_consistent"].func
_UTC_MILLISECONDS = RetryEvent._utc_milliseconds  # the same code pydantic runs on ts


def decode_wire(payload: bytes) -> Any | None:
    """The event in ``payload`` as a :data:`WireEvent`, or ``None`` to let pydantic judge it.

    The returned object has the same attribute names and values as the pydantic model
    (``ts`` a UTC datetime at millisecond precision, enums as enum members).
    """
    try:
        event = _DECODER.decode(payload)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    for name in _FINITE_FIELDS:
        if not math.isfinite(getattr(event, name)):
            return None
    if isinstance(event.ts, str):
        try:
            parsed = datetime.fromisoformat(event.ts)
        except ValueError:
            return None
        event.ts = _UTC_MILLISECONDS(parsed)
    for name, factory in _FACTORY_FIELDS:
        if getattr(event, name) is msgspec.UNSET:
            setattr(event, name, factory())
    try:
        _CONSISTENT(event)
    except ValueError:
        return None
    return event


__all__ = ["UnsupportedSchemaError", "WireEvent", "decode_wire"]
