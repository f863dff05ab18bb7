"""Building retry events from a task's state: one place, so every event carries the same ids.

Ids (event, trace, span, correlation) come from the governor's :mod:`~retrylens.sdk.core.ids`
source: its seeded ``random.Random`` when it was given one (the simulated fleet, tests
replay exactly), ``os.urandom`` otherwise.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from retrylens.schemas.limits import MAX_ERROR_MESSAGE_CHARS
from retrylens.schemas.taxonomy import EventKind, TaskOutcome

from ..text.lazy_pattern import LazyPattern
from .ids import IdSource, SeededIds

if TYPE_CHECKING:
    from retrylens.schemas import ContextSnapshot, ErrorDetail, RetryEvent

    from ..text.context import Message
    from ..text.sanitizer import Failure
    from .state import TaskState

M = TypeVar("M")

_STATIC_DEFAULTS: dict[str, Any] | None = None
_SNAPSHOT_CACHE_SIZE = 512
_SNAPSHOT_CACHE_CHARS = 8_192  # larger contexts are not memoised: the key keeps their text
_HEX_DIGEST = LazyPattern(r"[0-9a-f]{16,64}")  # the schema's HexDigest
_ALL_FIELDS: set[str] = set()


#: :mod:`retrylens.sdk.text.context`, loaded with the first snapshot (a failed attempt), not
#: with the SDK's import; kept here, as an ``import`` inside the method would run the import
#: machinery on every retried attempt
_CONTEXT: Any = None


def _load_context() -> Any:
    global _CONTEXT
    from ..text import context

    _CONTEXT = context
    return context


def _defaults() -> dict[str, Any]:
    """Every field's default, so ``model_construct`` never resolves one (it is slow).

    In the schema's field order (``event_id`` and ``ts`` as ``None`` placeholders), so an
    event built on it serializes with pydantic's key order.
    """
    global _STATIC_DEFAULTS
    if _STATIC_DEFAULTS is None:
        from retrylens.schemas.event import RetryEvent

        _STATIC_DEFAULTS = {
            name: None if field.default_factory is not None else field.default
            for name, field in RetryEvent.model_fields.items()
        }
        _ALL_FIELDS.update(_STATIC_DEFAULTS)
    return {**_STATIC_DEFAULTS, "input_features": {}, "side_effects": []}


def _event_class() -> type[RetryEvent]:
    """The pydantic event model, imported on first use (agents pay for it only when emitting)."""
    global _EVENT_CLASS
    if _EVENT_CLASS is None:
        from retrylens.schemas.event import RetryEvent

        _EVENT_CLASS = RetryEvent
    return _EVENT_CLASS


_EVENT_CLASS: type[RetryEvent] | None = None
# ``object.__new__`` held here: ``cls.__new__`` is looked up through pydantic's metaclass
# (an ABCMeta) on every call, a third of what making the instance costs
_new = object.__new__
_SLOTS: tuple[Callable[[Any, Any], None], ...] | None = None


def _slot_setters() -> tuple[Callable[[Any, Any], None], ...]:
    """The setters of a pydantic model's four slots (its fields live in ``__dict__``).

    Called directly they skip the frozen model's ``__setattr__`` without the lookup
    ``object.__setattr__`` makes each time.
    """
    global _SLOTS
    if _SLOTS is None:
        from pydantic import BaseModel

        slots = BaseModel.__dict__
        _SLOTS = tuple(
            slots[name].__set__
            for name in (
                "__dict__",
                "__pydantic_fields_set__",
                "__pydantic_extra__",
                "__pydantic_private__",
            )
        )
    return _SLOTS


def _construct(values: dict[str, Any], fields_set: set[str] | None = None) -> RetryEvent:
    """What ``RetryEvent.model_construct`` does, minus its per-field bookkeeping (~15× faster).

    ``fields_set`` may be shared between events that set the same fields: pydantic never
    mutates a frozen model's fields set (``model_copy`` copies it first).
    """
    cls = _EVENT_CLASS or _event_class()
    set_dict, set_fields, set_extra, set_private = _SLOTS or _slot_setters()
    event = _new(cls)
    set_dict(event, values)
    set_fields(event, fields_set if fields_set is not None else set(values))
    set_extra(event, None)
    set_private(event, None)
    return event


def construct_part(cls: type[M], values: dict[str, Any]) -> M:
    """An event part (snapshot, error detail, …) from values already typed and bounded.

    The same shortcut as :func:`_construct`: ``values`` must name every field, in order.
    """
    set_dict, set_fields, set_extra, set_private = _SLOTS or _slot_setters()
    part = _new(cls)
    set_dict(part, values)
    set_fields(part, set(values))
    set_extra(part, None)
    set_private(part, None)
    return part  # type: ignore[no-any-return]


def utc_now_ms() -> datetime:
    """Now in UTC at the store's millisecond resolution (cheaper than ``now().replace()``).

    Events come several per millisecond on a retry path, so the datetime of the current
    millisecond is kept and reused (datetimes are immutable; the pair is swapped whole).
    """
    global _NOW
    ms = time.time_ns() // 1_000_000
    cached = _NOW
    if cached[0] == ms:
        return cached[1]
    now = datetime.fromtimestamp(ms / 1000, UTC)
    _NOW = (ms, now)
    return now


_NOW: tuple[int, datetime] = (-1, datetime.fromtimestamp(0, UTC))


def hex_id(rng: random.Random, bits: int) -> str:
    return f"{rng.getrandbits(bits):0{bits // 4}x}"


def new_uuid(rng: random.Random) -> uuid.UUID:
    return uuid.UUID(int=rng.getrandbits(128), version=4)


class EventFactory:
    """Makes :class:`RetryEvent` s for one governor (project, clock, rng, validation mode).

    ``validate=False`` skips pydantic validation (the events are built only from typed
    values here, and the consumer validates every message again); tests run with
    validation on. ``ids`` defaults to drawing from ``rng``.
    """

    def __init__(
        self,
        *,
        project: str,
        wall: Callable[[], datetime],
        rng: random.Random,
        validate: bool = True,
        ids: IdSource | None = None,
    ) -> None:
        self.project = project
        self.wall = wall
        self.rng = rng
        self.validate = validate
        self.ids: IdSource = ids or SeededIds(rng)
        self._snapshots: dict[Any, ContextSnapshot] = {}
        self._details: dict[tuple[str, str, int | None, str | None], ErrorDetail] = {}

    def make(
        self,
        state: TaskState,
        kind: EventKind,
        *,
        correlation_id: str,
        span_id: str | None,
        **fields: Any,
    ) -> RetryEvent:
        """One event of ``state``'s task; ``fields`` set or override the per-event values."""
        return self.build(state, kind, correlation_id, span_id, fields)

    def build(
        self,
        state: TaskState,
        kind: EventKind,
        correlation_id: str,
        span_id: str | None,
        fields: dict[str, Any],
    ) -> RetryEvent:
        """:meth:`make` with ``fields`` as a dict (the governor's own, per-event path).

        Without validation, the fields every event of the task shares (all defaults,
        project, agent, ids, fingerprint, policy) are built once per task and copied.
        """
        if self.validate:
            values: dict[str, Any] = {
                "event_id": self.ids.uuid4(),
                "ts": self.wall(),
                "project": self.project,
                "agent": state.agent,
                "task_id": state.task_id,
                "correlation_id": correlation_id,
                "parent_task_id": state.parent_task_id,
                "trace_id": state.trace_id,
                "span_id": span_id,
                "parent_span_id": state.root_span_id if span_id != state.root_span_id else None,
                "attempt": state.attempt,
                "phase": state.phase,
                "kind": kind,
                "dependency": state.dependency,
                "input_fingerprint": state.fingerprint,
                "policy_id": state.policy.id,
                "policy_version": state.policy.version,
                "degraded": state.degraded,
            }
            values.update(fields)
            return _event_class()(**values)
        cached = state.event_base
        if cached is None or cached[0] is not state.policy or cached[1] != self.project:
            cached = state.event_base = (state.policy, self.project, self._base(state))
        values = cached[2].copy()  # a copy of the table: far cheaper than a dict display
        values["event_id"] = self.ids.uuid4()
        ts = self.wall()
        values["ts"] = (
            ts if not ts.microsecond % 1000 else ts.replace(microsecond=ts.microsecond // 1000 * 1000)
        )
        values["correlation_id"] = correlation_id
        values["span_id"] = span_id
        values["parent_span_id"] = state.root_span_id if span_id != state.root_span_id else None
        values["attempt"] = state.attempt
        values["phase"] = state.phase
        values["kind"] = kind
        values["dependency"] = state.dependency
        values["degraded"] = state.degraded
        values["input_features"] = {}
        values["side_effects"] = []
        values.update(fields)
        # ``_construct(values, …)`` inline: seven events a retried call
        cls = _EVENT_CLASS or _event_class()
        set_dict, set_fields, set_extra, set_private = _SLOTS or _slot_setters()
        event = _new(cls)
        set_dict(event, values)
        set_fields(event, _ALL_FIELDS if len(values) == len(_ALL_FIELDS) else set(values))
        set_extra(event, None)
        set_private(event, None)
        return event

    def _base(self, state: TaskState) -> dict[str, Any]:
        """The fields every event of ``state``'s task shares, on all defaults, in field order."""
        base = _defaults()
        base["project"] = self.project
        base["agent"] = state.agent
        base["task_id"] = state.task_id
        base["parent_task_id"] = state.parent_task_id
        base["trace_id"] = state.trace_id
        base["input_fingerprint"] = state.fingerprint
        base["policy_id"] = state.policy.id
        base["policy_version"] = state.policy.version
        return base

    def context_snapshot(
        self,
        messages: Sequence[Message],
        *,
        previous: Sequence[str] | None = None,
        last: int = 3,
        tool_calls: Sequence[str] = (),
    ) -> ContextSnapshot:
        """:func:`~retrylens.sdk.text.context.snapshot` of an attempt's context, memoised on its
        content: retried attempts of the same input carry the same context again, and a
        snapshot (frozen) can be shared between events."""
        context = _CONTEXT or _load_context()
        content_key, snapshot_fields = context.content_key, context.snapshot_fields
        content = content_key(messages)
        if sum(len(part[2]) for part in content) > _SNAPSHOT_CACHE_CHARS:
            return self.snapshot(
                snapshot_fields(messages, previous=previous, last=last, tool_calls=tool_calls)
            )
        key = (content, None if previous is None else tuple(previous), last, tuple(tool_calls))
        cache = self._snapshots
        found = cache.get(key)
        if found is None:
            found = self.snapshot(
                snapshot_fields(messages, previous=previous, last=last, tool_calls=tool_calls)
            )
            if len(cache) >= _SNAPSHOT_CACHE_SIZE:
                cache.clear()
            cache[key] = found
        return found

    def error_detail(self, failure: Failure) -> ErrorDetail:
        """``failure.detail()``, built directly when not validating and every value is one
        the schema takes (a digest an agent set itself is still validated)."""
        digest = failure.stack_digest
        if self.validate or (digest is not None and not _HEX_DIGEST.compiled.fullmatch(digest)):
            return failure.detail()
        key = (failure.message, failure.code, failure.status, digest)
        details = self._details
        found = details.get(key)
        if found is None:  # a retried failure repeats its detail: one frozen part, shared
            from retrylens.schemas.event import ErrorDetail

            from ..text.redaction import redact

            status = failure.status
            found = construct_part(
                ErrorDetail,
                {
                    "message": redact(failure.message, limit=MAX_ERROR_MESSAGE_CHARS),
                    "code": failure.code[:128],
                    "status": status if status is None or 0 <= status <= 999 else None,
                    "stack_digest": digest,
                },
            )
            if len(failure.message) <= _SNAPSHOT_CACHE_CHARS:  # the key keeps the text
                if len(details) >= _SNAPSHOT_CACHE_SIZE:
                    details.clear()
                details[key] = found
        return found

    def snapshot(self, fields: dict[str, Any]) -> ContextSnapshot:
        """A context snapshot from :func:`~retrylens.sdk.text.context.snapshot_fields` (validated
        when this factory validates; built directly otherwise: the fields are bounded)."""
        from retrylens.schemas.event import ContextMessage, ContextSnapshot

        pairs = fields["last_messages"]
        if self.validate:
            fields["last_messages"] = [ContextMessage(role=r, content=c) for r, c in pairs]
            return ContextSnapshot(**fields)
        fields["last_messages"] = [
            construct_part(ContextMessage, {"role": r, "content": c}) for r, c in pairs
        ]
        return construct_part(ContextSnapshot, fields)

    def compact(self, success: RetryEvent, features: dict[str, Any]) -> RetryEvent:
        """The compact form of a clean first-try success: ``success`` carrying the task's end.

        One ``attempt_succeeded`` event (attempt 1) with ``outcome='succeeded'`` and the
        task's ``input_features`` stands for task_started, attempt_started,
        attempt_succeeded and task_finished (see :mod:`retrylens.schemas.event`).
        """
        values = {**success.__dict__, "outcome": TaskOutcome.SUCCEEDED, "input_features": features}
        return _event_class()(**values) if self.validate else _construct(values)
