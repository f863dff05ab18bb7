"""How a task run turns what happened into events: one builder, the compact hold-back, snapshots.

A run opened in *compact* mode (``Governor.call`` / ``acall`` do) holds back task_started,
attempt_started and a first-try success; if the task then finishes as succeeded they
become ONE compact ``attempt_succeeded`` event (see :mod:`retrylens.schemas.event`),
otherwise they are emitted, in order, before the next one.

Every event of an attempt carries the policy that attempt ran under, even when a reload
(or the kill switch) lands while it runs: the decision after it is made under the new
policy, and says so in its reason.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from retrylens.schemas.taxonomy import EventKind, SideEffectStatus

if TYPE_CHECKING:
    from retrylens.schemas import RetryEvent

    from .state import Attempt, TaskState

COMPACT_SEQUENCE = (EventKind.TASK_STARTED, EventKind.ATTEMPT_STARTED, EventKind.ATTEMPT_SUCCEEDED)


class RunEvents:
    """The event side of a :class:`~retrylens.sdk.core.run.TaskRun` (a mixin: it reads ``g``/``state``)."""

    g: Any
    state: TaskState
    last_attempt: Attempt | None
    _held: list[RetryEvent] | None
    _logged_full: bool

    def _event(
        self,
        kind: EventKind,
        *,
        attempt: Attempt | None = None,
        span_id: str | None = None,
        **fields: Any,
    ) -> None:
        s = self.state
        if attempt is not None:
            if "phase" not in fields:
                fields["phase"] = attempt.phase
            if "dependency" not in fields:
                fields["dependency"] = attempt.dependency
            correlation, span = attempt.correlation_id, attempt.span_id
            ran_under = attempt.policy
        else:
            correlation, span = f"{s.task_id}:{s.attempt}"[:128], span_id or s.root_span_id
            ran_under = None
        if ran_under is not None and ran_under is not s.policy:
            current, s.policy = s.policy, ran_under  # the attempt's events name its own policy
            try:
                event = self.g.events.build(s, kind, correlation, span, fields)
            finally:
                s.policy = current
        else:
            event = self.g.events.build(s, kind, correlation, span, fields)
        held = self._held
        if held is not None:
            if len(held) < len(COMPACT_SEQUENCE) and kind is COMPACT_SEQUENCE[len(held)]:
                held.append(event)
                return
            self._release()
        self.g.emit(event)

    def _release(self) -> None:
        """Emit the held events: the task will not end as a clean first-try success."""
        held, self._held = self._held, None
        for event in held or ():
            self.g.emit(event)

    def _side_effect_event(
        self, tool: str, key: str, status: SideEffectStatus, rollback: str | None = None
    ) -> None:
        self._event(
            EventKind.SIDE_EFFECT,
            attempt=self.last_attempt,
            side_effects=[
                _side_effect(tool=tool[:128], idempotency_key=key, status=status, rollback=rollback)
            ],
        )

    def _latency(self, attempt: Attempt, latency_ms: int | None) -> int:
        if latency_ms is not None:
            return max(0, int(latency_ms))
        return max(0, int((self.g.clock() - attempt.started_at) * 1000))

    def _snapshot(self, attempt: Attempt, *, on_failure: bool) -> Any:
        """Log-noise rule: the task's first failure carries the full snapshot, later ones deltas."""
        given = self.state.given
        previous = given[-2] if len(given) >= 2 else None
        snap = self.g.events.context_snapshot
        if on_failure and not self._logged_full:
            self._logged_full = True
            return snap(attempt.messages, tool_calls=attempt.tool_calls)
        if previous is None:
            return snap(attempt.messages, last=0, tool_calls=attempt.tool_calls)
        return snap(attempt.messages, previous=previous, tool_calls=attempt.tool_calls)


def package_snapshot(data: dict[str, Any]) -> Any:
    """The redacted hand-off package as a bounded snapshot, so the store keeps it."""
    from retrylens.schemas.event import ContextMessage, ContextSnapshot
    from retrylens.schemas.limits import MAX_MESSAGE_CHARS

    def cut(text: str) -> str:
        return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"

    parts = [
        ("handoff:input", data["inputs"]),
        ("handoff:output", data["failed_output"] or json.dumps(data["outputs"], default=str)),
        ("handoff:errors", json.dumps(data["errors"][-5:], default=str)),
        ("handoff:error", json.dumps(data["error"], default=str)),
        ("handoff:context", json.dumps(data["context"][-3:], default=str)),
    ]
    return ContextSnapshot(
        message_count=len(data["context"]),
        last_messages=[ContextMessage(role=role, content=cut(text)) for role, text in parts],
    )


def _side_effect(**fields: Any) -> Any:
    from retrylens.schemas.event import SideEffect

    return SideEffect(**fields)
