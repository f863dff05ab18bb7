"""The server's redaction of one event, field by field (``ingest/redaction.py``).

``tests/api/test_server_redaction.py`` holds every road to storing no secret, with the real
store; these pure tests pin what :func:`redact_event_text` returns for each free-text field
alone, for both shapes an event arrives in (the pydantic ``RetryEvent`` of the JSON road,
the msgspec ``WireEvent`` of the fast one): the secret gone, every other field and message
kept as it was, and the very same object when nothing needed cleaning (the HTTP road
re-encodes an event only when ``clean is not event``: a needless copy would cost a
re-encode per event, and a missed one would store the secret). They are the mutation
target ``ingest_redaction``'s tests (``infra/mutation_targets/ingest_store.py``).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from retrylens.analytics.synthetic import synthetic_events
from retrylens.ingest.redaction import redact_event_text
from retrylens.schemas import RetryEvent, limits
from retrylens.schemas.wire import decode_wire
from retrylens.sdk.text.redaction import redact

SECRET = "sk-proj-Zx81QmT4vB7nR2pL9sK3wY6d"
DIRTY = f"provider said: invalid key {SECRET}"
CLEAN = "the provider timed out after 30 s"


def _failed(**changes: Any) -> dict[str, Any]:
    """One synthetic failed attempt as JSON, its free text replaced by ``changes``."""
    event = next(e for e in synthetic_events(3, seed=11) if e.kind == "attempt_failed")
    raw = event.model_dump(mode="json")
    raw["decision_reason"] = ""
    raw["error_detail"] = {"message": "", "code": "E42", "status": 401}
    raw["context_snapshot"] = None
    raw.update(changes)
    return raw


def _shapes(raw: dict[str, Any]) -> list[Any]:
    wire = decode_wire(orjson.dumps(raw))
    assert wire is not None
    return [RetryEvent.model_validate(raw), wire]


def _snapshot(*contents: str) -> dict[str, Any]:
    return {"message_count": len(contents), "last_messages": [{"role": "tool", "content": c} for c in contents]}


def _fields(event: Any) -> dict[str, Any]:
    """Every field as plain data, whichever shape the event is."""
    if isinstance(event, RetryEvent):
        return orjson.loads(event.model_dump_json())
    return orjson.loads(orjson.dumps(orjson.loads(_msgspec_json(event))))


def _msgspec_json(event: Any) -> bytes:
    import msgspec

    return msgspec.json.encode(event)


@pytest.mark.parametrize("shape", [0, 1], ids=["RetryEvent", "WireEvent"])
@pytest.mark.parametrize(
    "raw",
    [
        _failed(),
        _failed(error_detail=None),
        _failed(decision_reason=CLEAN, error_detail={"message": CLEAN}, context_snapshot=_snapshot(CLEAN, "ok")),
        _failed(context_snapshot=_snapshot()),
    ],
    ids=["empty texts", "no detail", "clean texts", "no messages"],
)
def test_an_event_with_nothing_to_clean_is_returned_itself(raw: dict[str, Any], shape: int) -> None:
    event = _shapes(raw)[shape]
    assert redact_event_text(event) is event


@pytest.mark.parametrize("shape", [0, 1], ids=["RetryEvent", "WireEvent"])
def test_a_secret_in_the_reason_alone_is_cleaned_and_nothing_else_changes(shape: int) -> None:
    raw = _failed(decision_reason=DIRTY, error_detail={"message": CLEAN, "code": "E42"},
                  context_snapshot=_snapshot(CLEAN))
    event = _shapes(raw)[shape]
    clean = redact_event_text(event)
    expected = _fields(event) | {"decision_reason": redact(DIRTY, limit=limits.MAX_REASON_CHARS)}
    assert SECRET not in expected["decision_reason"]
    assert _fields(clean) == expected
    assert clean.error_detail is event.error_detail and clean.context_snapshot is event.context_snapshot


@pytest.mark.parametrize("shape", [0, 1], ids=["RetryEvent", "WireEvent"])
def test_a_secret_in_the_error_message_alone_is_cleaned_and_its_code_and_status_kept(shape: int) -> None:
    raw = _failed(decision_reason=CLEAN, error_detail={"message": DIRTY, "code": "E42", "status": 401})
    event = _shapes(raw)[shape]
    clean = redact_event_text(event)
    expected = _fields(event)
    expected["error_detail"] = expected["error_detail"] | {
        "message": redact(DIRTY, limit=limits.MAX_ERROR_MESSAGE_CHARS)}
    assert SECRET not in expected["error_detail"]["message"]
    assert _fields(clean) == expected
    assert clean.error_detail.code == "E42" and clean.error_detail.status == 401
    assert event.error_detail.message == DIRTY, "the event handed in is left as it was"


@pytest.mark.parametrize("shape", [0, 1], ids=["RetryEvent", "WireEvent"])
def test_only_the_messages_holding_a_secret_are_replaced(shape: int) -> None:
    raw = _failed(context_snapshot=_snapshot(CLEAN, DIRTY, "fine"))
    event = _shapes(raw)[shape]
    clean = redact_event_text(event)
    before, after = event.context_snapshot.last_messages, clean.context_snapshot.last_messages
    assert [m.content for m in after] == [CLEAN, redact(DIRTY, limit=limits.MAX_MESSAGE_CHARS), "fine"]
    assert SECRET not in after[1].content and after[1].role == "tool"
    assert after[0] is before[0] and after[2] is before[2], "a clean message is kept, not copied"
    expected = _fields(event)
    expected["context_snapshot"]["last_messages"][1]["content"] = after[1].content
    assert _fields(clean) == expected
    assert clean.decision_reason == "" and clean.error_detail is event.error_detail


@pytest.mark.parametrize("shape", [0, 1], ids=["RetryEvent", "WireEvent"])
def test_a_secret_in_every_field_is_cleaned_in_each(shape: int) -> None:
    raw = _failed(decision_reason=DIRTY, error_detail={"message": DIRTY}, context_snapshot=_snapshot(DIRTY))
    clean = redact_event_text(_shapes(raw)[shape])
    assert SECRET not in orjson.dumps(_fields(clean)).decode()
    assert clean.decision_reason.startswith("provider said: invalid key ")


@pytest.mark.parametrize("shape", [0, 1], ids=["RetryEvent", "WireEvent"])
def test_a_cleaned_text_at_the_field_limit_stays_within_it(shape: int) -> None:
    """The placeholder can be longer than the secret: each field is cut to its own limit."""
    reason = ("x " * limits.MAX_REASON_CHARS)[: limits.MAX_REASON_CHARS - len(SECRET) - 1] + " " + SECRET
    message = ("y " * limits.MAX_ERROR_MESSAGE_CHARS)[: limits.MAX_ERROR_MESSAGE_CHARS - len(SECRET) - 1] + " " + SECRET
    raw = _failed(decision_reason=reason, error_detail={"message": message})
    assert len(reason) == limits.MAX_REASON_CHARS and len(message) == limits.MAX_ERROR_MESSAGE_CHARS
    clean = redact_event_text(_shapes(raw)[shape])
    assert clean.decision_reason == redact(reason, limit=limits.MAX_REASON_CHARS)
    assert clean.error_detail.message == redact(message, limit=limits.MAX_ERROR_MESSAGE_CHARS)
    assert len(clean.decision_reason) <= limits.MAX_REASON_CHARS
    assert len(clean.error_detail.message) <= limits.MAX_ERROR_MESSAGE_CHARS
    assert SECRET not in clean.decision_reason + clean.error_detail.message


#: A text whose cleaned form sorts after it ("[" after "A"), as DIRTY's sorts before it ("[" before "s"):
#: a comparison that only asked "is it smaller" would miss one of the two.
DIRTY_FIRST = "AKIAZ7QW3ER5TY1UI9OP refused for bucket"


@pytest.mark.parametrize("shape", [0, 1], ids=["RetryEvent", "WireEvent"])
@pytest.mark.parametrize("text", [DIRTY, DIRTY_FIRST], ids=["cleaned sorts before", "cleaned sorts after"])
@pytest.mark.parametrize("field", ["reason", "message", "snapshot"])
def test_a_secret_in_one_field_is_cleaned_when_the_other_two_are_absent(field: str, text: str, shape: int) -> None:
    """No reason, no error detail and no snapshot is the one shape returned at once; each
    field alone, the other two absent (empty, None), is still cleaned."""
    changes: dict[str, Any] = {"error_detail": None, "context_snapshot": None}
    if field == "reason":
        changes["decision_reason"] = text
    elif field == "message":
        changes["error_detail"] = {"message": text, "code": "E42"}
    else:
        changes["context_snapshot"] = _snapshot(text)
    event = _shapes(_failed(**changes))[shape]
    clean = redact_event_text(event)
    stored = orjson.dumps(_fields(clean)).decode()
    assert "AKIAZ7QW3ER5TY1UI9OP" not in stored and SECRET not in stored
    texts = {
        "reason": clean.decision_reason,
        "message": clean.error_detail.message if clean.error_detail else None,
        "snapshot": clean.context_snapshot.last_messages[0].content if clean.context_snapshot else None,
    }
    assert texts[field] == redact(text, limit={"reason": limits.MAX_REASON_CHARS,
                                               "message": limits.MAX_ERROR_MESSAGE_CHARS,
                                               "snapshot": limits.MAX_MESSAGE_CHARS}[field])
    assert [name for name, value in texts.items() if name != field and value] == []
