"""Secrets sent past the SDK are removed before an event is stored, by the SDK's own patterns.

An agent without the SDK (raw HTTP, an OTel exporter whose exception messages quote a key,
a producer writing to the topic) sends its text as it is. Every road judges an event with
:func:`~.processor.validate`, which hands the valid event here: its free text (the error
message, the decision reason, the context snapshot's messages) is cleaned with
:func:`retrylens.sdk.text.redaction.redact`, the one set of patterns the SDK applies before an
event leaves an agent, so the store, the failure groups' examples and every page show the
same redaction whichever way the event came. People's names are not the server's to
remove: the SDK removes them unless the deployment chose to keep them (``names=False``).

This sits on the ingest path: a text seen before is answered from a memo, one no pattern
can match is told by a few substring tests
(:func:`~retrylens.sdk.text.redaction.may_hold_secrets`), and an event without free text costs
three attribute reads.
"""

from __future__ import annotations

from typing import Any

import msgspec
from pydantic import BaseModel

from retrylens.schemas import limits
from retrylens.sdk.text.redaction import redact

__all__ = ["redact_event_text"]


def _replace(part: Any, **changes: Any) -> Any:
    if isinstance(part, BaseModel):
        return part.model_copy(update=changes)
    return msgspec.structs.replace(part, **changes)


def redact_event_text(event: Any) -> Any:
    """``event`` (a ``WireEvent`` or a ``RetryEvent``) with its free text cleaned; the same
    object when there was nothing to clean."""
    reason, detail, snapshot = event.decision_reason, event.error_detail, event.context_snapshot
    if not reason and detail is None and snapshot is None:
        return event
    changes: dict[str, Any] = {}
    if reason:
        cleaned = redact(reason, limit=limits.MAX_REASON_CHARS)
        if cleaned != reason:
            changes["decision_reason"] = cleaned
    if detail is not None and detail.message:
        cleaned = redact(detail.message, limit=limits.MAX_ERROR_MESSAGE_CHARS)
        if cleaned != detail.message:
            changes["error_detail"] = _replace(detail, message=cleaned)
    if snapshot is not None and snapshot.last_messages:
        messages = snapshot.last_messages
        cleaned_messages = [redact(m.content, limit=limits.MAX_MESSAGE_CHARS) for m in messages]
        if any(c != m.content for c, m in zip(cleaned_messages, messages, strict=True)):
            changes["context_snapshot"] = _replace(
                snapshot,
                last_messages=[
                    m if c == m.content else _replace(m, content=c)
                    for c, m in zip(cleaned_messages, messages, strict=True)
                ],
            )
    return _replace(event, **changes) if changes else event
