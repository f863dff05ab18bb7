"""A fast decoder for the retry event, written out beside the pydantic model it must agree with.

Validating every consumed message with pydantic costs about three JSON parses; the
consumer handles tens of thousands of events a second, so its common case uses a msgspec
decoder instead. The msgspec structs below spell the event out explicitly (fields,
defaults, bounds, anchored patterns, enums, nested parts). They are not generated from
pydantic's field metadata: that is pydantic's internal representation, it changed shape
in every recent minor release, and the generator that read it broke the consumer (and
``retrylens demo``) on any pydantic but 2.13. What keeps the two from drifting is
``tests/foundation/test_wire_contract.py``: it holds these structs equal to the model's
exported JSON Schema (a public, stable contract: field names, required/optional,
defaults, bounds, patterns, enum values, nested parts), so a field added to
:class:`~retrylens.schemas.RetryEvent` without its twin here fails a test, not a user.

The contract is one-sided, and callers rely on it: if :func:`decode_wire` accepts a
payload, pydantic accepts it too and reads the same values; when it returns ``None``
(anything unusual: lax coercions such as ``"3"`` for an int, a non-RFC 3339 timestamp, an
error of any kind) the caller falls back to the pydantic model, which has the final word
and the error message. ``tests/foundation/test_wire.py`` checks this differentially on
mutated payloads and on every field's boundary values.

Patterns are written ``\\A…\\Z``: pydantic's (Rust) regex ``$`` never matches before a
final newline, Python's does.
"""

import re
import typing
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from types import UnionType
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from . import limits
from .event import SCHEMA_VERSION, RetryEvent, utc_now_ms
from .taxonomy import Decision, ErrorType, EventKind, SideEffectStatus, TaskOutcome

#: RFC 3339 with at most microsecond digits: the form every RetryLens emitter writes and
#: one that pydantic and :meth:`datetime.fromisoformat` read identically.
RFC3339_PATTERN = r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)\Z"

HexTraceId = Annotated[str, Meta(pattern=r"\A[0-9a-f]{32}\Z")]
HexSpanId = Annotated[str, Meta(pattern=r"\A[0-9a-f]{16}\Z")]
HexDigest = Annotated[str, Meta(pattern=r"\A[0-9a-f]{16,64}\Z")]
Identifier = Annotated[
    str, Meta(min_length=1, max_length=limits.MAX_ID_CHARS, pattern=r"\A[^\x00-\x1f]+\Z")
]
Name = Annotated[str, Meta(min_length=1, max_length=limits.MAX_NAME_CHARS)]
ShortText = Annotated[str, Meta(max_length=limits.MAX_NAME_CHARS)]
FeatureKey = Annotated[str, Meta(min_length=1, max_length=limits.MAX_FEATURE_KEY_CHARS)]
FeatureValue = (
    bool
    | Annotated[int, Meta(ge=limits.MIN_FEATURE_INT, le=limits.MAX_FEATURE_INT)]
    | float
    | Annotated[str, Meta(max_length=limits.MAX_FEATURE_VALUE_CHARS)]
)
Rfc3339 = Annotated[str, Meta(pattern=RFC3339_PATTERN)]
Count = Annotated[int, Meta(ge=0, le=limits.MAX_COUNT)]


class _Part(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Like the model's parts, unknown fields are an error (each subclass is ``kw_only``)."""


class WireAgentRef(_Part, kw_only=True):
    name: Name
    role: ShortText = ""


class WireErrorDetail(_Part, kw_only=True):
    message: Annotated[str, Meta(max_length=limits.MAX_ERROR_MESSAGE_CHARS)] = ""
    code: ShortText = ""
    status: Annotated[int, Meta(ge=0, le=999)] | None = None
    stack_digest: HexDigest | None = None


class WireContextMessage(_Part, kw_only=True):
    role: ShortText
    content: Annotated[str, Meta(max_length=limits.MAX_MESSAGE_CHARS)]


class WireContextSnapshot(_Part, kw_only=True):
    message_count: Count
    token_count: Count = 0
    message_digests: Annotated[list[HexDigest], Meta(max_length=limits.MAX_MESSAGE_DIGESTS)] = (
        msgspec.field(default_factory=list)
    )
    last_messages: Annotated[
        list[WireContextMessage], Meta(max_length=limits.MAX_LAST_MESSAGES)
    ] = msgspec.field(default_factory=list)
    pollution_score: Annotated[float, Meta(ge=0.0, le=1.0)] = 0.0
    is_delta: bool = False
    trailing_errors: Count = 0
    recent_error_share: Annotated[float, Meta(ge=0.0, le=1.0)] = 0.0
    repeated_tool_calls: Count = 0


class WireSideEffect(_Part, kw_only=True):
    tool: Name
    idempotency_key: Identifier
    status: SideEffectStatus
    rollback: ShortText | None = None


class WireEvent(_Part, kw_only=True):
    """:class:`~retrylens.schemas.RetryEvent` on the wire, same field names and order.

    ``event_id`` and ``ts`` are declared as they arrive (absent → ``UNSET``; ``ts`` an
    RFC 3339 string); :func:`decode_wire` replaces them with the model's values (a UUID,
    a UTC datetime at millisecond precision), so a returned event reads like the model.
    """

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: uuid.UUID | UnsetType = UNSET
    ts: Rfc3339 | UnsetType = UNSET
    project: Identifier
    agent: WireAgentRef
    task_id: Identifier
    correlation_id: Identifier
    parent_task_id: Identifier | None = None
    trace_id: HexTraceId | None = None
    span_id: HexSpanId | None = None
    parent_span_id: HexSpanId | None = None
    attempt: Annotated[int, Meta(ge=0, le=limits.MAX_ATTEMPT)] = 0
    phase: ShortText = ""
    kind: EventKind
    dependency: ShortText = ""
    error_type: ErrorType | None = None
    retryable: bool | None = None
    error_detail: WireErrorDetail | None = None
    input_fingerprint: HexDigest | None = None
    input_features: Annotated[
        dict[FeatureKey, FeatureValue], Meta(max_length=limits.MAX_INPUT_FEATURES)
    ] = msgspec.field(default_factory=dict)
    context_snapshot: WireContextSnapshot | None = None
    side_effects: Annotated[list[WireSideEffect], Meta(max_length=limits.MAX_SIDE_EFFECTS)] = (
        msgspec.field(default_factory=list)
    )
    decision: Decision = Decision.NONE
    decision_reason: Annotated[str, Meta(max_length=limits.MAX_REASON_CHARS)] = ""
    backoff_ms: Annotated[int, Meta(ge=0, le=86_400_000)] = 0
    policy_id: ShortText = ""
    policy_version: ShortText = ""
    shadow: bool = False
    shadow_decision: Decision | None = None
    propensity: Annotated[float, Meta(gt=0.0, le=1.0)] | None = None
    degraded: bool = False
    outcome: TaskOutcome | None = None
    tokens_in: Count = 0
    tokens_out: Count = 0
    cost_usd: Annotated[float, Meta(ge=0.0, le=limits.MAX_COST_USD)] = 0.0
    latency_ms: Count = 0


#: Float fields without an upper bound. :func:`decode_wire` declines a value there unless it
#: is finite (the model may say ``allow_inf_nan=False``, which JSON Schema cannot show) and
#: below 2**53 in magnitude (pydantic <= 2.11 rejects JSON integers from about 2**62 for a
#: float where msgspec converts them; no real cost comes near either limit).
UNBOUNDED_FLOATS: tuple[str, ...] = ()  # cost_usd is bounded since MAX_COST_USD
_FLOAT_LIMIT = float(2**53)

# --- the decoder: WireEvent's types and bounds, its patterns checked without regexes --------
#
# msgspec checks a ``Meta(pattern=...)`` by calling Python's ``re`` for every string, which
# was half of the decode's time. The decoder below reads a twin of WireEvent derived from it
# with those patterns removed (the timestamp's kept: it is parsed next anyway), and
# :func:`_patterns_hold` then checks each removed pattern with plain string operations that
# accept exactly the strings the pattern accepts. Every pattern of WireEvent must have such
# a check (an import-time assertion), so a pattern added to the struct cannot go unchecked.

_HEX = "0123456789abcdef"


def _hex(low: int, high: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        return low <= len(value) <= high and not value.strip(_HEX)

    return check


_NO_CONTROL = re.compile(r"[\x00-\x1f]")
#: The fast check of each pattern WireEvent uses (Identifier's is in _patterns_hold).
_PATTERN_CHECKS: dict[str, Callable[[str], bool]] = {
    r"\A[0-9a-f]{32}\Z": _hex(32, 32),
    r"\A[0-9a-f]{16}\Z": _hex(16, 16),
    r"\A[0-9a-f]{16,64}\Z": _hex(16, 64),
    r"\A[^\x00-\x1f]+\Z": lambda value: bool(value) and _NO_CONTROL.search(value) is None,
}
#: (struct name, field) of every pattern the twin drops, with its pattern.
_DROPPED: dict[tuple[str, str], str] = {}


def _without_patterns(tp: Any, owner: str, field: str, cache: dict[type, type]) -> Any:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *metas = typing.get_args(tp)
        base = _without_patterns(base, owner, field, cache)
        kept = []
        for meta in metas:
            if meta.pattern is not None and meta.pattern != RFC3339_PATTERN:
                _DROPPED[(owner, field)] = meta.pattern
                bounds = {
                    name: getattr(meta, name)
                    for name in ("min_length", "max_length", "ge", "le", "gt", "lt")
                    if getattr(meta, name) is not None
                }
                if bounds:
                    kept.append(Meta(**bounds))
            else:
                kept.append(meta)
        return Annotated[(base, *kept)] if kept else base  # type: ignore[return-value]
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return _twin(tp, cache)
    if origin in (typing.Union, UnionType):
        return typing.Union[tuple(_without_patterns(arg, owner, field, cache) for arg in typing.get_args(tp))]  # noqa: UP007
    if origin is list:
        return list[_without_patterns(typing.get_args(tp)[0], owner, field, cache)]  # type: ignore[misc]
    if origin is dict:
        key, value = typing.get_args(tp)
        return dict[_without_patterns(key, owner, field, cache), _without_patterns(value, owner, field, cache)]  # type: ignore[misc]
    return tp


def _twin(struct: type, cache: dict[type, type]) -> type:
    if struct not in cache:
        hints = typing.get_type_hints(struct, include_extras=True)
        fields: list[Any] = []
        for each in msgspec.structs.fields(struct):
            kind = _without_patterns(hints[each.name], struct.__name__, each.name, cache)
            if each.default is not msgspec.NODEFAULT:
                fields.append((each.name, kind, each.default))
            elif each.default_factory is not msgspec.NODEFAULT:
                fields.append((each.name, kind, msgspec.field(default_factory=each.default_factory)))
            else:
                fields.append((each.name, kind))
        # gc=False: a decoded event is a tree read from JSON (no cycle can form through it), so
        # its structs need not be tracked by the cyclic collector; the consumer decodes a
        # poll's thousands of events at a time (decode 7.6-9.8 -> 5.5-6.6 us an event, load 20)
        cache[struct] = msgspec.defstruct(
            struct.__name__, fields, kw_only=True, forbid_unknown_fields=True, gc=False
        )
    return cache[struct]


_FAST_EVENT = _twin(WireEvent, {})
#: What _patterns_hold checks; it must be every pattern the twin dropped.
_CHECKED: dict[tuple[str, str], str] = {
    ("WireEvent", "project"): r"\A[^\x00-\x1f]+\Z",
    ("WireEvent", "task_id"): r"\A[^\x00-\x1f]+\Z",
    ("WireEvent", "correlation_id"): r"\A[^\x00-\x1f]+\Z",
    ("WireEvent", "parent_task_id"): r"\A[^\x00-\x1f]+\Z",
    ("WireSideEffect", "idempotency_key"): r"\A[^\x00-\x1f]+\Z",
    ("WireEvent", "trace_id"): r"\A[0-9a-f]{32}\Z",
    ("WireEvent", "span_id"): r"\A[0-9a-f]{16}\Z",
    ("WireEvent", "parent_span_id"): r"\A[0-9a-f]{16}\Z",
    ("WireEvent", "input_fingerprint"): r"\A[0-9a-f]{16,64}\Z",
    ("WireErrorDetail", "stack_digest"): r"\A[0-9a-f]{16,64}\Z",
    ("WireContextSnapshot", "message_digests"): r"\A[0-9a-f]{16,64}\Z",
}
assert _DROPPED == _CHECKED, f"a WireEvent pattern has no fast check: {set(_DROPPED.items()) ^ set(_CHECKED.items())}"
_IDENTIFIER = _PATTERN_CHECKS[r"\A[^\x00-\x1f]+\Z"]


def _patterns_hold(event: Any, payload: bytes) -> bool:
    """Whether every string of ``event`` matches the pattern the twin did not check."""
    # A JSON string holds a control character only if the text escapes it (the decoder
    # refuses raw ones), so without a backslash every identifier is free of them.
    if b"\\" in payload:
        identifiers = [event.project, event.task_id, event.correlation_id]
        if event.parent_task_id is not None:
            identifiers.append(event.parent_task_id)
        identifiers.extend(effect.idempotency_key for effect in event.side_effects)
        if not all(map(_IDENTIFIER, identifiers)):
            return False
    # The hex fields: each one's length checked alone, their characters in one pass over
    # their concatenation (one ``strip`` per event instead of one call per field: this runs
    # on the consumer's thread for every event).
    hexes: list[str] = []
    value = event.trace_id
    if value is not None:
        if len(value) != 32:
            return False
        hexes.append(value)
    for value in (event.span_id, event.parent_span_id):
        if value is not None:
            if len(value) != 16:
                return False
            hexes.append(value)
    value = event.input_fingerprint
    if value is not None:
        if not 16 <= len(value) <= 64:
            return False
        hexes.append(value)
    error = event.error_detail
    if error is not None and error.stack_digest is not None:
        if not 16 <= len(error.stack_digest) <= 64:
            return False
        hexes.append(error.stack_digest)
    context = event.context_snapshot
    if context is not None and context.message_digests:
        digests = context.message_digests
        if not (16 <= min(map(len, digests)) and max(map(len, digests)) <= 64):
            return False
        hexes.extend(digests)
    # Deleting the hex digits from the bytes leaves nothing exactly when every character is
    # one: a table lookup per byte, where ``strip(_HEX)`` (what this was) scanned the 16-char
    # set for every character of an all-hex string (~1-3 us an event). Any other character
    # leaves a byte: non-ASCII ones encode to bytes >= 0x80 (a lone surrogate too, by
    # ``surrogatepass``, should one ever get past the JSON decoder, instead of raising).
    return not "".join(hexes).encode("utf-8", "surrogatepass").translate(None, _HEX_BYTES)


_HEX_BYTES = _HEX.encode()
_DECODER = msgspec.json.Decoder(_FAST_EVENT)
# The model's own validator code, run on the struct (it only reads attributes), so the
# cross-field rules and the timestamp normalisation cannot drift from pydantic's.
_CONSISTENT = RetryEvent._consistent
_UTC_MILLISECONDS = RetryEvent._utc_milliseconds


def decode_wire(payload: bytes, *, fill_event_id: bool = True) -> WireEvent | None:
    """The event in ``payload`` with :class:`WireEvent`'s fields, or ``None`` to let pydantic judge it.

    (The struct is WireEvent's pattern-free twin, its patterns checked by :func:`_patterns_hold`.)

    The returned object has the same attribute names and values as the pydantic model
    (``ts`` a UTC datetime at millisecond precision, ``event_id`` a UUID, enums as enum
    members); a missing ``event_id``/``ts`` is filled like the model's defaults would.
    With ``fill_event_id=False`` a missing ``event_id`` stays ``UNSET``: the consumer
    derives it from the payload instead, and learns it was absent without a second parse.
    """
    try:
        event = _DECODER.decode(payload)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if not _patterns_hold(event, payload):
        return None
    for name in UNBOUNDED_FLOATS:
        if not -_FLOAT_LIMIT < getattr(event, name) < _FLOAT_LIMIT:  # also False for NaN
            return None
    ts = event.ts
    if ts is UNSET:
        event.ts = utc_now_ms()  # type: ignore[assignment]
    else:
        try:
            parsed = datetime.fromisoformat(ts)
            # Already UTC at millisecond precision (what the SDK sends): the model's
            # normalisation would return it unchanged; anything else goes through it.
            if parsed.tzinfo is not UTC or parsed.microsecond % 1000:
                parsed = _UTC_MILLISECONDS(parsed)  # type: ignore[arg-type]
            event.ts = parsed  # type: ignore[assignment]
        except (ValueError, OverflowError):  # e.g. 0001-01-01T00:00:00+01:00 has no UTC
            return None
    if fill_event_id and event.event_id is UNSET:
        event.event_id = uuid.uuid4()
    try:
        _CONSISTENT(event)  # type: ignore[arg-type]
    except ValueError:
        return None
    return event


__all__ = [
    "RFC3339_PATTERN",
    "UNBOUNDED_FLOATS",
    "WireAgentRef",
    "WireContextMessage",
    "WireContextSnapshot",
    "WireErrorDetail",
    "WireEvent",
    "WireSideEffect",
    "decode_wire",
]
