"""What leaves the agent is redacted: names in any form, every secret pattern on its own,
card numbers but not plain numbers, and every hand-off channel unless told to send raw.

Asserted on emitted (flushed) event bytes and on what the channels deliver, through the
governor a user builds with default settings.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from retrylens.errors import HandedOff
from retrylens.schemas import EventKind
from retrylens.sdk import CallbackChannel, FileChannel, Governor, HandoffPackage
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)


def governor(**kwargs: object) -> Governor:
    kwargs.setdefault("rng", random.Random(7))
    return Governor.with_virtual_time(start=START, **kwargs)  # type: ignore[arg-type]


def _fails_once_with(message: str):  # noqa: ANN202
    def work(attempt) -> str:  # noqa: ANN001
        if attempt.number == 1:
            raise ConnectionError(message)
        return "ok"

    return work


def _emitted(message: str, goal: str = "look the order up") -> tuple[bytes, list[str]]:
    """Every byte emitted for a call whose first attempt fails with ``message``."""
    with capture_events() as captured:
        gov = governor(emit=captured.emit)
        assert gov.call(_fails_once_with(message), goal=goal, agent="a") == "ok"
        captured.events  # noqa: B018 - flushes; every record parses back as an event
        blob = b"".join(k + v for k, v in captured.records())
        messages = [
            e.error_detail.message
            for e in captured.of_kind(EventKind.ATTEMPT_FAILED)
            if e.error_detail is not None
        ]
    assert blob and messages, "nothing was emitted: the test would prove nothing"
    return blob, messages


# -- people's names ----------------------------------------------------------------------------
NAMES = {
    "unicode": ("refund failed for José Álvarez", ["José", "Álvarez", "Jos\\u00e9"]),
    "last, first": ("refund failed for Chen, Mei (gold tier)", ["Chen", "Mei"]),
    "last, first with a middle name": (
        "refund failed for Chen, Mei Ling (gold tier)",
        ["Chen", "Mei", "Ling"],
    ),
    "upper-case surname": ("refund failed for CHEN Mei", ["CHEN", "Mei"]),
    "surname last in capitals": ("refund failed for Mei CHEN", ["CHEN", "Mei"]),
    "title": ("refund failed: Mr. Chen was not found", ["Chen"]),
    "title without a dot": ("refund failed: Dr Álvarez is away", ["Álvarez", "\\u00c1lvarez"]),
    "particle": ("letter for Ludwig van Beethoven bounced", ["Ludwig", "Beethoven"]),
    "two particles": ("letter for Johannes van der Waals bounced", ["Johannes", "Waals"]),
    "two particles after a first name": (
        "refund failed for María de la Cruz",
        ["María", "Cruz", "Mar\\u00eda"],
    ),
    "apostrophe": ("letter for Seán O'Brien bounced", ["O'Brien", "Se\\u00e1n"]),
}


@pytest.mark.parametrize("case", NAMES, ids=list(NAMES))
def test_a_name_in_an_error_message_never_reaches_events(case: str) -> None:
    message, words = NAMES[case]
    blob, messages = _emitted(message)
    for word in words:
        assert word.encode() not in blob, f"{word!r} leaked"
    assert all("[NAME]" in m for m in messages)


@pytest.mark.parametrize(
    "goal", ["draft a reply to Chen, Mei", "draft a reply to José Álvarez", "call Mrs. Chen"]
)
def test_a_name_in_the_goal_never_reaches_events(goal: str) -> None:
    blob, _ = _emitted("connection reset by peer", goal=goal)
    for word in (b"Chen", b"Jos", b"lvarez"):
        assert word not in blob


#: error text an agent really sees; none of it names a person, so it must come out unchanged
ORDINARY_ERRORS = [
    "429 Too Many Requests",
    "500 Internal Server Error",
    "502 Bad Gateway",
    "503 Service Unavailable",
    "504 Gateway Timeout",
    "404 Not Found: /v1/orders/12345",
    "401 Unauthorized",
    "403 Forbidden",
    "422 Unprocessable Entity",
    "[Errno 104] Connection reset by peer",
    "[Errno 111] Connection refused",
    "HTTPSConnectionPool(host='api.openai.com', port=443): Read timed out. (read timeout=600)",
    "Error code: 429 - {'error': {'message': 'Rate limit reached for gpt-4o in organization "
    "on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.'}}",
    "Expecting value: line 1 column 1 (char 0)",
    "1 validation error for Answer total Field required [type=missing]",
    "AWS Lambda function timed out after 30 seconds",
    "SSL: CERTIFICATE_VERIFY_FAILED certificate verify failed",
    "Temporary failure in name resolution",
    "Max retries exceeded with url: /v1/chat/completions",
    "Overloaded: Anthropic API is temporarily overloaded",
    "Retry-After: 2",
    "The read operation timed out",
    "Invalid API Key provided",
    "Context Window Exceeded: maximum context length is 128000 tokens",
    "Payment Required",
    "Deadline Exceeded",
    "Service Unavailable, please retry later",
    "order totals 12345 67890 13579 24680 11111 22222 33333 44444",
    "invoice 2024-05-01 amount 1234.56 EUR, ref 12345678, items 4 8 15 16 23 42",
    "years 2021 2022 2023 2024 2025",
    "phone 1234 5678 9012 3456 7890 ids",
]


@pytest.mark.parametrize("text", ORDINARY_ERRORS)
def test_an_ordinary_error_message_reaches_events_unchanged(text: str) -> None:
    _, messages = _emitted(text)
    assert messages == [f"ConnectionError: {text}"]


def test_a_table_of_five_digit_numbers_keeps_every_number() -> None:
    """The hand-off package stored with the event shows the table as the agent had it."""
    rng = random.Random(23)
    rows = [" ".join(str(rng.randint(10_000, 99_999)) for _ in range(6)) for _ in range(100)]
    table = "\n".join(rows)
    with capture_events() as captured:
        gov = governor(emit=captured.emit, handoff=CallbackChannel(lambda _package: None))
        with pytest.raises(HandedOff):
            gov.call(lambda: (_ for _ in ()).throw(RuntimeError("totals differ")), goal=table)
        (handoff,) = captured.of_kind(EventKind.HANDOFF)
    assert handoff.context_snapshot is not None
    stored = {m.role: m.content for m in handoff.context_snapshot.last_messages}
    shown = stored["handoff:input"].removesuffix("…")  # cut to the stored message's limit
    assert "[CARD]" not in shown and len(shown) > 1_000 and table.startswith(shown)


def _luhn_completed(prefix: str) -> str:
    """``prefix`` with the check digit that makes it Luhn-valid."""
    for check in "0123456789":
        digits = prefix + check
        total = 0
        for i, ch in enumerate(reversed(digits)):
            d = int(ch) * (2 if i % 2 else 1)
            total += d - 9 if d > 9 else d
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


def _grouped(digits: str, sizes: list[int], sep: str) -> str:
    out, at = [], 0
    for size in sizes:
        out.append(digits[at : at + size])
        at += size
    return sep.join(out)


CARD_16 = _luhn_completed("411111111111111")
AMEX = _luhn_completed("37828224631000")
DINERS = _luhn_completed("3056930902590")
LONG_19 = _luhn_completed("601111111111111111")
CARDS = {
    "visa unbroken": CARD_16,
    "visa spaced": _grouped(CARD_16, [4, 4, 4, 4], " "),
    "visa dashed": _grouped(CARD_16, [4, 4, 4, 4], "-"),
    "amex spaced": _grouped(AMEX, [4, 6, 5], " "),
    "amex unbroken": AMEX,
    "diners dashed": _grouped(DINERS, [4, 6, 4], "-"),
    "19 digits spaced": _grouped(LONG_19, [4, 4, 4, 4, 3], " "),
    "mastercard 2-series": _luhn_completed("222100000000000"),
}


@pytest.mark.parametrize("case", CARDS, ids=list(CARDS))
def test_a_card_number_never_reaches_events(case: str) -> None:
    card = CARDS[case]
    blob, messages = _emitted(f"charge declined for card {card}, try another")
    assert card.encode() not in blob and card.replace(" ", "").encode() not in blob
    assert messages == ["ConnectionError: charge declined for card [CARD], try another"]


# -- every secret pattern on its own ------------------------------------------------------------
SECRETS = {
    "authorization basic": ("Authorization: Basic bWVpOmh1bnRlcjI=", "bWVpOmh1bnRlcjI"),
    "authorization digest": (
        'Authorization: Digest username="mei", realm="shop", response="6629fae49393a0539745"',
        "6629fae49393a0539745",
    ),
    "authorization custom scheme": ("authorization=Token abc123xyz789", "abc123xyz789"),
    "authorization no scheme": ("Authorization: q8Zt3Kpq8Zt3Kp", "q8Zt3Kpq8Zt3Kp"),
    "bearer": ("sent bearer Zx81QmT4vB7nR2pL9sK3", "Zx81QmT4vB7nR2pL9sK3"),
    "password in a url": ("connect postgres://bob:pw123zz@db:5432/orders", "pw123zz"),
    "openai key": ("using sk-proj-Zx81QmT4vB7nR2pL9sK3wY6d", "Zx81QmT4vB7nR2pL9sK3wY6d"),
    "aws key": ("using AKIAZ7QW3ER5TY1UI9OP", "AKIAZ7QW3ER5TY1UI9OP"),
    "github token": (
        "using ghp_7Hq2Wm9Xk4Lp1Zr8Tn5Vb3Yc6Gd0Fs2Aj4Ke",
        "7Hq2Wm9Xk4Lp1Zr8Tn5Vb3Yc6Gd0Fs2Aj4Ke",
    ),
    "slack token": ("using xoxb-12345678901-abcdefghijkl", "12345678901-abcdefghijkl"),
    "google key": ("using AIzaSyB3x9Qw7Er5Ty1Ui3Op5As7Df9Gh1Jk3L", "SyB3x9Qw7Er5Ty1Ui3Op5As7Df9"),
    "bare jwt": (
        "rejected eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtZWkifQ.q8Zt3Kp in the header",
        "eyJzdWIiOiJtZWkifQ",
    ),
    "key=value": ("config api_key=Zx81QmT4vB7n failed", "Zx81QmT4vB7n"),
    "quoted key: value": ('payload {"secret": "Zx81QmT4vB7n"}', "Zx81QmT4vB7n"),
    "password said in words": ("login with password hunter2xyz failed", "hunter2xyz"),
    "token is": ("the token is abc123secret", "abc123secret"),
    "e-mail": ("no account for mei.chen@example.com", "mei.chen@example.com"),
}


@pytest.mark.parametrize("case", SECRETS, ids=list(SECRETS))
def test_each_secret_pattern_alone_keeps_its_secret_out_of_events(case: str) -> None:
    message, secret = SECRETS[case]
    blob, messages = _emitted(message)
    assert secret.encode() not in blob, f"{case} leaked"
    assert any(tag in messages[0] for tag in ("REDACTED", "[EMAIL]")), messages


# -- hand-off channels --------------------------------------------------------------------------
SENSITIVE_GOAL = "refund order 7 for José Álvarez, Authorization: Basic bWVpOmh1bnRlcjI="
SENSITIVE_ERROR = "gateway rejected Chen, Mei with key sk-proj-Zx81QmT4vB7nR2pL9sK3wY6d"
LEAKS = ["José", "Álvarez", "bWVpOmh1bnRlcjI", "Chen", "Mei", "Zx81QmT4vB7nR2pL9sK3wY6d"]


def _hand_off(channel: object) -> None:
    def fails() -> str:
        raise RuntimeError(SENSITIVE_ERROR)

    gov = governor(handoff=channel)
    with pytest.raises(HandedOff):
        gov.call(fails, goal=SENSITIVE_GOAL, agent="support")


def _leaks(text: str) -> list[str]:
    return [word for word in LEAKS if word in text]


def test_a_callback_channel_receives_the_redacted_package() -> None:
    packages: list[HandoffPackage] = []
    _hand_off(CallbackChannel(packages.append))
    (package,) = packages
    assert _leaks(json.dumps(package.__dict__, ensure_ascii=False, default=str)) == []
    assert "refund order 7" in package.inputs and package.errors


def test_a_callback_channel_built_raw_receives_the_package_as_the_agent_had_it() -> None:
    packages: list[HandoffPackage] = []
    _hand_off(CallbackChannel(packages.append, raw=True))
    assert packages[0].inputs == SENSITIVE_GOAL


def test_a_file_channel_writes_neither_names_nor_secrets(tmp_path: Path) -> None:
    target = tmp_path / "handoffs.jsonl"
    _hand_off(FileChannel(target))
    text = target.read_text(encoding="utf-8")
    assert json.loads(text)["inputs"].startswith("refund order 7")
    assert _leaks(text) == [] and _leaks(json.loads(text)["inputs"]) == []


def test_a_file_channel_built_raw_keeps_the_package_as_the_agent_had_it(tmp_path: Path) -> None:
    target = tmp_path / "handoffs.jsonl"
    _hand_off(FileChannel(target, raw=True))
    assert json.loads(target.read_text(encoding="utf-8"))["inputs"] == SENSITIVE_GOAL


def _luhn_broken(card: str) -> str:
    """``card`` with its check digit changed: the same shape, no longer a card number."""
    last = card[-1]
    return card[:-1] + str((int(last) + 5) % 10)


@pytest.mark.parametrize("case", CARDS, ids=list(CARDS))
def test_a_card_shaped_number_that_fails_the_checksum_is_kept(case: str) -> None:
    number = _luhn_broken(CARDS[case])
    _, messages = _emitted(f"reference {number} not found")
    assert messages == [f"ConnectionError: reference {number} not found"]


@pytest.mark.parametrize("first", ["0", "1", "7", "8", "9"])
def test_a_luhn_valid_number_outside_the_card_ranges_is_kept(first: str) -> None:
    number = _grouped(_luhn_completed(first + "41111111111111"), [4, 4, 4, 4], " ")
    _, messages = _emitted(f"reference {number} not found")
    assert messages == [f"ConnectionError: reference {number} not found"]


def test_every_check_digit_but_the_right_one_is_refused() -> None:
    """The checksum itself: of ten candidates for the last digit exactly one is a card."""
    prefix = "4539 1488 0343 646"
    redacted = []
    for digit in "0123456789":
        _, messages = _emitted(f"card {prefix}{digit} declined")
        redacted += [digit] if "[CARD]" in messages[0] else []
    assert redacted == [_luhn_completed(prefix.replace(" ", ""))[-1]]
