"""Events pass a processor chain before they leave the agent (structlog's pattern).

Every event the governor emits goes through ``Governor.processors``: a list of callables
``processor(event) -> event | None`` applied in order (``None`` drops the event). The
default chain is :class:`redact_event` (secrets, people's names found by
:mod:`.personal`, plus any personal-data patterns a deployment adds, over every free-text
field) then
:class:`truncate_event` (the schema's limits, in one place). :class:`sample` is a hook
to thin out events a deployment does not want to ship.

Why here and not in :func:`~retrylens.sdk.text.sanitizer.redact`: ``redact`` also cleans what
a *model* is shown on a retry, and a model must still see the customer's name to do the
task; only what leaves the process for the event store loses it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from retrylens.schemas.limits import MAX_ERROR_MESSAGE_CHARS, MAX_MESSAGE_CHARS, MAX_REASON_CHARS

from .lazy_pattern import LazyPattern
from .personal import redact_names
from .redaction import redact  # not via .sanitizer: that loads the failure classifier

if TYPE_CHECKING:
    from retrylens.schemas import RetryEvent

Processor = Callable[["RetryEvent"], "RetryEvent | None"]

#: The old name rule (two or more ASCII-capitalised words in a row), for deployments that
#: pass it as an extra pattern; the default finds names with :mod:`.personal` instead.
NAME_PATTERN = r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b"


class redact_event:  # noqa: N801 - reads as a sentence in a chain
    """Redact secrets, people's names (``names=False`` keeps them) and ``patterns``."""

    def __init__(
        self, patterns: Iterable[str] = (), replacement: str = "[NAME]", *, names: bool = True
    ) -> None:
        self.patterns = [LazyPattern(p) for p in patterns]
        self.replacement = replacement
        self.names = names
        self.clean = functools.lru_cache(maxsize=4_096)(self._clean)  # texts repeat a lot
        self._snapshots: dict[int, tuple[Any, Any]] = {}  # id → (snapshot, cleaned snapshot)

    def _clean(self, text: str, limit: int) -> str:
        text = redact(text, limit=limit)
        if self.names:
            text = redact_names(text, self.replacement)
        for pattern in self.patterns:
            text = pattern.sub(self.replacement, text)
        return text

    def __call__(self, event: RetryEvent) -> RetryEvent:
        fields = event.__dict__
        reason, detail, snap = (
            fields["decision_reason"],
            fields["error_detail"],
            fields["context_snapshot"],
        )
        if not reason and detail is None and snap is None:
            return event  # no free text (most attempt and task events)
        changes: dict[str, Any] = {}
        if reason:
            cleaned_reason = self.clean(reason, MAX_REASON_CHARS)
            if cleaned_reason != reason:
                changes["decision_reason"] = cleaned_reason
        if detail is not None and detail.message:
            message = self.clean(detail.message, MAX_ERROR_MESSAGE_CHARS)
            if message != detail.message:
                changes["error_detail"] = detail.model_copy(update={"message": message})
        if snap is not None and snap.last_messages:
            # snapshots are memoised and shared between events (frozen): cleaned once each
            known = self._snapshots.get(id(snap))
            if known is None or known[0] is not snap:
                known = (snap, self._clean_snapshot(snap))
                if len(self._snapshots) >= 512:
                    self._snapshots.clear()
                self._snapshots[id(snap)] = known
            if known[1] is not snap:
                changes["context_snapshot"] = known[1]
        return event.model_copy(update=changes) if changes else event

    def _clean_snapshot(self, snap: Any) -> Any:
        """``snap`` with its messages cleaned (``snap`` itself when nothing changes)."""
        clean = self.clean
        cleaned = [clean(m.content, MAX_MESSAGE_CHARS) for m in snap.last_messages]
        if not any(c != m.content for c, m in zip(cleaned, snap.last_messages, strict=True)):
            return snap
        messages = [
            m if c == m.content else m.model_copy(update={"content": c})
            for c, m in zip(cleaned, snap.last_messages, strict=True)
        ]
        return snap.model_copy(update={"last_messages": messages})


class truncate_event:  # noqa: N801
    """Cut free text to the schema's limits (the one place they are applied on the agent)."""

    def __call__(self, event: RetryEvent) -> RetryEvent:
        if len(event.decision_reason) > MAX_REASON_CHARS:
            return event.model_copy(
                update={"decision_reason": event.decision_reason[: MAX_REASON_CHARS - 1] + "…"}
            )
        return event


class sample:  # noqa: N801
    """Keep an event only when ``keep(event)`` says so (e.g. drop a share of clean successes)."""

    def __init__(self, keep: Callable[[RetryEvent], bool]) -> None:
        self.keep = keep

    def __call__(self, event: RetryEvent) -> RetryEvent | None:
        return event if self.keep(event) else None


def default_processors(pii_patterns: Sequence[str] = ()) -> list[Processor]:
    return [redact_event(pii_patterns), truncate_event()]


def process(processors: Sequence[Processor], event: RetryEvent) -> RetryEvent | None:
    for processor in processors:
        result = processor(event)
        if result is None:
            return None
        event = result
    return event
