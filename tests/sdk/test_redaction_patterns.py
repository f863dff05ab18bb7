"""Every pattern of the shared redaction module is pinned: taking any one of them out lets
its secret through (so no pattern is untested, as ``github_pat_`` tokens once were), every
key prefix is redacted on the emitted bytes, and the one-search pre-filter never changes
what the patterns alone would give.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from error_corpus import ORDINARY_ERRORS

from retrylens.sdk import Governor
from retrylens.sdk.text import redaction
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)

#: one text for each pattern, in the order of REDACTIONS then CHECKED, with the part that
#: must not survive; no other pattern catches it, so the pattern alone is what removes it
ONE_PER_PATTERN: list[tuple[str, str]] = [
    ("key -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg\n-----END EC PRIVATE KEY-----", "MHcCAQEEIBkg"),
    ("Authorization: Basic bWVpOmh1bnRlcjI=", "bWVpOmh1bnRlcjI"),
    ("sent bearer Zx81QmT4vB7nR2pL9sK3", "Zx81QmT4vB7nR2pL9sK3"),
    ("connect postgres://bob:pw123zz@db:5432/orders", "pw123zz"),
    ("using sk-proj-Zx81QmT4vB7nR2pL9sK3wY6d", "Zx81QmT4vB7nR2pL9sK3wY6d"),
    ("using AKIAZ7QW3ER5TY1UI9OP", "AKIAZ7QW3ER5TY1UI9OP"),
    ("using github_pat_11ABCDE2F0aBcDeFgHiJkLmN_oPqRsTuVwXyZ0123456789", "11ABCDE2F0aBcDeFgHiJkLmN"),
    ("using AIzaSyB3x9Qw7Er5Ty1Ui3Op5As7Df9Gh1Jk3L", "SyB3x9Qw7Er5Ty1Ui3Op5As7Df9"),
    ("rejected eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtZWkifQ.q8Zt3Kp now", "eyJzdWIiOiJtZWkifQ"),
    ("config api_key=Zx81QmT4vB7n failed", "Zx81QmT4vB7n"),
    ("login with password hunter2xyz failed", "hunter2xyz"),
    ("no account for mei.chen@example.com", "mei.chen@example.com"),
    ("signing with wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY failed", "wJalrXUtnFEMI"),
    ("refund to GB82 WEST 1234 5698 7654 32 bounced", "5698 7654"),
    ("charge declined for card 4111 1111 1111 1111, try another", "4111 1111 1111 1111"),
    ("call back on +44 20 7946 0958 today", "7946 0958"),
]


def _entries() -> list[object]:
    return [*redaction.REDACTIONS, *redaction.CHECKED]


def test_every_pattern_has_its_own_text() -> None:
    assert len(ONE_PER_PATTERN) == len(_entries())


@pytest.mark.parametrize("index", range(len(ONE_PER_PATTERN)))
def test_each_pattern_alone_removes_its_secret(
    index: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, secret = ONE_PER_PATTERN[index]
    assert secret not in redaction.redact(text)
    entry = _entries()[index]
    monkeypatch.setattr(redaction, "REDACTIONS", [e for e in redaction.REDACTIONS if e is not entry])
    monkeypatch.setattr(redaction, "CHECKED", [e for e in redaction.CHECKED if e is not entry])
    assert secret in redaction._redact(text, None), "another pattern catches it: not pinned"


#: every prefix of the key patterns' alternations, as a token of its kind
KEY_PREFIXES = {
    "github_pat_": "github_pat_11ABCDE2F0aBcDeFgHiJkLmN_oPqRsTuVwXyZ0123456789",
    "ghp_": "ghp_7Hq2Wm9Xk4Lp1Zr8Tn5Vb3Yc6Gd0Fs2Aj4Ke",
    "gho_": "gho_7Hq2Wm9Xk4Lp1Zr8Tn5Vb3Yc6Gd0Fs2Aj4Ke",
    "ghs_": "ghs_7Hq2Wm9Xk4Lp1Zr8Tn5Vb3Yc6Gd0Fs2Aj4Ke",
    "ghu_": "ghu_7Hq2Wm9Xk4Lp1Zr8Tn5Vb3Yc6Gd0Fs2Aj4Ke",
    "ghr_": "ghr_7Hq2Wm9Xk4Lp1Zr8Tn5Vb3Yc6Gd0Fs2Aj4Ke",
    "xoxa-": "xoxa-12345678901-abcdefghijkl",
    "xoxb-": "xoxb-12345678901-abcdefghijkl",
    "xoxp-": "xoxp-12345678901-abcdefghijkl",
    "xoxr-": "xoxr-12345678901-abcdefghijkl",
    "sk-": "sk-Zx81QmT4vB7nR2pL9sK3wY6d",
    "pk-": "pk-Zx81QmT4vB7nR2pL9sK3wY6d",
    "rk-": "rk-Zx81QmT4vB7nR2pL9sK3wY6d",
    "AKIA": "AKIAZ7QW3ER5TY1UI9OP",
    "ASIA": "ASIAZ7QW3ER5TY1UI9OP",
    "AIza": "AIzaSyB3x9Qw7Er5Ty1Ui3Op5As7Df9Gh1Jk3L",
}


@pytest.mark.parametrize("prefix", KEY_PREFIXES, ids=list(KEY_PREFIXES))
def test_a_key_of_every_prefix_never_reaches_the_emitted_bytes(prefix: str) -> None:
    token = KEY_PREFIXES[prefix]

    def work(attempt) -> str:  # noqa: ANN001
        if attempt.number == 1:
            raise ConnectionError(f"upstream refused {token} (401)")
        return "ok"

    with capture_events() as captured:
        gov = Governor.with_virtual_time(start=START, rng=random.Random(7), emit=captured.emit)
        assert gov.call(work, goal="sync the repository", agent="ops") == "ok"
        blob = b"".join(k + v for k, v in captured.records())
    assert b"refused [REDACTED_KEY] (401)" in blob
    assert token[len(prefix) :].encode() not in blob


def _without_prefilter(text: str) -> str:
    for pattern, replacement in redaction.REDACTIONS:
        text = pattern.sub(replacement, text)
    for pattern, check in redaction.CHECKED:
        text = pattern.sub(check, text)
    return text


def test_the_pre_filter_never_changes_what_the_patterns_give() -> None:
    """On every planted secret, the ordinary corpus, and random mixes of both."""
    rng = random.Random(5)
    texts = [t for t, _ in ONE_PER_PATTERN] + list(KEY_PREFIXES.values()) + ORDINARY_ERRORS
    mixes = [" ".join(rng.sample(texts, 3)) for _ in range(200)]
    for text in texts + mixes:
        assert redaction._redact(text, None) == _without_prefilter(text), text


@pytest.mark.parametrize(
    "text",
    [
        "connection reset by peer",
        "upstream timed out after 300 ms",
        "rate_limit in execution step 1",
        "Request timed out.",
        "503 Service Unavailable",
        "1 attempts, 383 tokens",
    ],
)
def test_the_pre_filter_passes_a_short_ordinary_message_at_once(text: str) -> None:
    """What makes clean text cheap on the server's ingest path: no pattern is run at all."""
    assert not redaction.may_hold_secrets(text)


@pytest.mark.parametrize("text", ["ſecret=hunter2xyz", "Authorİzation: Basic bWVpOmh1bnRlcjI=",
                                  "apı_key: Zx81QmT4vB7n", "toKen=hunter2xyz"])
def test_a_key_word_spelled_with_the_letters_ignorecase_also_takes_is_redacted(text: str) -> None:
    """``re`` matches "ſ", "ı", "İ" and the Kelvin sign to s, i, i, k under IGNORECASE; the
    pre-filter's lower-casing once did not, so these passed it untouched."""
    assert redaction.may_hold_secrets(text)
    assert "[REDACTED]" in redaction.redact(text)


def test_each_pattern_runs_only_on_a_text_holding_its_fixed_part() -> None:
    """A text's patterns are chosen by their fixed parts: an ordinary message with an id runs
    the card pattern alone (each pattern costs 10-20 us a text, the server's ingest path pays
    it on every new text), and every planted secret still reaches its own pattern."""
    for (text, _secret), (pattern, _) in zip(ONE_PER_PATTERN, _entries(), strict=True):
        assert redaction._NEEDS[pattern](text, redaction._caseless(text)), text
    ordinary = "order 48213 failed: upstream timed out after 3000 ms (attempt 2 of 3)"
    run = [pattern.pattern for pattern, _ in _entries() if redaction._NEEDS[pattern](ordinary, ordinary.lower())]
    assert run == [redaction._CARD.pattern]
