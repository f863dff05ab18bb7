"""A secret that straddles the length limit of a message is redacted whole, however long.

Messages are cut to their limit, and to keep matching cheap on huge texts the sanitizer
cuts a text before matching too, keeping a margin past the limit so that a secret at the
edge is still seen whole. A token longer than the margin (a JWT of several hundred
characters is common) used to be cut inside the margin, so its pattern no longer matched
and the part before the limit reached the event: a JWT's header and claims. Read on the
emitted ``attempt_failed`` event, as an agent's failure would produce it.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from retrylens.schemas.limits import MAX_ERROR_MESSAGE_CHARS
from retrylens.sdk import Governor, RetryPolicy
from retrylens.sdk.text.sanitizer import redact


def _jwt(claims_chars: int) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    header = part({"alg": "HS256", "typ": "JWT"})
    claims = part({"sub": "mei.chen", "scope": "payments:write", "pad": "x" * claims_chars})
    return f"{header}.{claims}.c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmU"


@pytest.mark.parametrize("claims_chars", [50, 400, 2_000])
@pytest.mark.parametrize("lead", [10, 100, 255])
def test_a_jwt_across_the_limit_is_redacted_whole(claims_chars: int, lead: int) -> None:
    token = _jwt(claims_chars)
    limit = 300
    text = "x " * ((limit - lead) // 2) + token + " tail " * 400
    out = redact(text, limit=limit)
    assert len(out) <= limit
    assert token[:8] not in out, out[-80:]


def test_a_long_jwt_at_the_end_of_an_error_message_never_reaches_the_event() -> None:
    events: list[Any] = []
    governor = Governor(RetryPolicy(), project="p", emit=events.append, sleep=lambda s: None)
    token = _jwt(1_500)
    prefix = "upstream refused the call with the token " * (MAX_ERROR_MESSAGE_CHARS // 42)
    message = prefix[: MAX_ERROR_MESSAGE_CHARS - 40] + " " + token + " and more text after it"

    def fails() -> None:
        raise RuntimeError(message)

    with pytest.raises(Exception):  # noqa: B017 - whatever the governor raises at the end
        governor.call(fails, goal="charge the order", agent="billing")
    failed = [e for e in events if e.kind == "attempt_failed"]
    assert failed, [e.kind for e in events]
    for event in failed:
        text = event.model_dump_json()
        assert token[:8] not in text
        assert "eyJ" not in text


@pytest.mark.parametrize("limit", [1, 2, 50, 300, 5_000])
def test_a_long_text_keeps_exactly_its_limit(limit: int) -> None:
    """The cut before matching never shortens what the limit keeps."""
    text = "word " * (limit + 2_000)
    out = redact(text, limit=limit)
    assert len(out) == limit
    assert out == text[: limit - 1] + "…"
