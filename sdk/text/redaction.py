"""The secrets and personal numbers that never leave: one set of patterns for agent and server.

:func:`redact` removes API keys (OpenAI, AWS access keys and secret access keys, GitHub,
Slack, Google), bearer tokens and ``Authorization`` values of any scheme, JWTs, passwords
(in URLs, ``key=value`` or said in words), PEM private key blocks, e-mail addresses, card
numbers (Luhn-valid, written as cards are), IBANs (ISO 13616 check digits) and phone
numbers in international form (``+44 20 7946 0958``, E.164's 8 to 15 digits). The SDK
cleans events and hand-off packages with it; the server (``retrylens.ingest.redaction``)
imports this module, so a text sent past the SDK is cleaned by the same patterns before it
is stored. Nothing here imports the server.

Most texts hold none of these: :func:`may_hold_secrets` looks for any pattern's fixed
part, and a text without one comes back at once (the server calls this on its
ingest path). Each pattern that needs a number check (cards, IBANs, phones) verifies it
before replacing, so an ordinary error message (ids, timestamps, versions, hex request
ids) comes out unchanged: ``tests/sdk/test_redaction_world.py`` holds a corpus to that.

Why not the ``phonenumbers`` package: its import takes 0.2-1 s and each country's metadata
5-60 ms on first use (measured on this machine), paid on an agent's first failure; the
international form (a ``+``, a country code, 8-15 digits in groups) is what leaves an
agent in error text, and its shape is enough.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from .lazy_pattern import LazyPattern
from .number_checks import iban_ok, luhn_ok, phone_digits_ok

#: (pattern, replacement), applied in order; each must have a test that fails without it
#: (``tests/sdk/test_redaction_patterns.py`` removes each one in turn)
REDACTIONS: list[tuple[LazyPattern, str]] = [
    # a PEM private key block, whole; one cut before its END line goes to the end of the text
    (
        LazyPattern(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:.*?-----END (?:[A-Z0-9]+ )*"
            r"PRIVATE KEY-----|.*\Z)",
            re.DOTALL,
        ),
        "[REDACTED_PRIVATE_KEY]",
    ),
    # "Authorization: Basic bWVp…", "Digest username=…, response=…", any scheme, or none
    (
        LazyPattern(
            r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)([a-z][\w\-]*\s+)?"
            r"((?:[\w\-]+=(?:\"[^\"]*\"|[^\s,\"']*)(?:\s*,\s*)?)+|[^\s\"',;]+)"
        ),
        r"\1\2[REDACTED]",
    ),
    (LazyPattern(r"(?i)\b(bearer)\s+[a-z0-9._\-+/=]{8,}"), r"\1 [REDACTED]"),
    (LazyPattern(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s:@]+:[^@\s/]+@"), r"\1[REDACTED]@"),
    (LazyPattern(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{16,}\b"), "[REDACTED_KEY]"),
    (LazyPattern(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "[REDACTED_KEY]"),
    (
        LazyPattern(r"\b(ghp|gho|ghs|ghu|ghr|github_pat|xox[abpr])_?[A-Za-z0-9_\-]{16,}\b"),
        "[REDACTED_KEY]",
    ),
    (LazyPattern(r"\bAIza[0-9A-Za-z_\-]{30,}"), "[REDACTED_KEY]"),
    (
        LazyPattern(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),
        "[REDACTED_JWT]",
    ),
    (
        LazyPattern(
            r"(?i)\b(api[_\-]?key|secret|token|password|passwd|pwd)([\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]+"
        ),
        r"\1\2[REDACTED]",
    ),
    # "password hunter2xyz", "token is abc123secret": a value with a digit or symbol in it
    (
        LazyPattern(
            r"(?i)\b(api[_\-]?key|secret|token|password|passwd|pwd)(\s+(?:is\s+|of\s+)?)"
            r"(?=[^\s\[]*[\d!@#$%^&*_])[^\s\[\"',;&]{6,}"
        ),
        r"\1\2[REDACTED]",
    ),
    (LazyPattern(r"\b[\w.+\-]+@[\w\-]+\.[\w.\-]+\b"), "[EMAIL]"),
]

#: an AWS secret access key: 40 characters of base64's alphabet standing alone, with upper-
#: and lower-case letters and a digit (a hex digest of 40 is all lower case: kept)
_AWS_SECRET = LazyPattern(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
#: an IBAN: country, check digits, 11-30 letters and digits, unbroken or in groups of four
_IBAN = LazyPattern(
    r"\b[A-Z]{2}\d{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,4})?)\b"
)
#: a phone number in international form: "+", a country code, groups of digits
_PHONE = LazyPattern(
    r"(?<![\w+])\+[1-9]\d{0,3}(?:[ \-.]?(?:\(\d{1,5}\)|\d{1,5})){1,7}(?![\w+])"
)
#: a card number stands alone, unbroken or grouped as printed (4-4-4-4[-3], 4-6-5, 4-6-4);
#: a digit run of a table ("12345 67890 13579") is not one, whatever its checksum
_CARD = LazyPattern(
    r"(?<![\d.,])(?<!\d[ \-])"
    r"(?:\d{13,19}|\d{4}([ \-])\d{4}\1\d{4}\1\d{4}(?:\1\d{3})?|\d{4}([ \-])\d{6}\2\d{4,5})"
    r"(?!\d)(?![ \-]\d)"
)
_CARD_FIRST_DIGITS = "23456"  # the card networks' ranges (Mastercard 2/5, Amex 3, Visa 4, …)

#: the fixed parts of the patterns above: a text holding none of them comes back at once.
#: Plain substring tests (C-speed scans) and three small searches: one alternation of all
#: of them costs 5-10x more, as ``re`` tries every branch at every position.
_CASED_PARTS = ("AKIA", "ASIA", "AIza", "eyJ", "-----BEGIN", "@", "+", "k-", "gh", "xox")
_CASELESS_PARTS = ("authoriz", "bearer")
_KEY_WORDS = ("api", "secret", "token", "passw", "pwd")
#: a key word as the two key=value patterns need it ("383 tokens" is not one)
_KEY_WORD = LazyPattern(r"(?i)\b(?:api[_\-]?key|secret|token|password|passwd|pwd)[\"'\s:=]")
_FOUR_DIGITS = LazyPattern(r"\d\d\d\d")  # every card has four digits in a row
_IBAN_START = LazyPattern(r"[A-Z][A-Z]\d\d")
_FORTY = LazyPattern(r"[A-Za-z0-9/+]{40}")  # an AWS secret access key's length


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    is_card = digits[0] in _CARD_FIRST_DIGITS and luhn_ok(digits)
    return "[CARD]" if is_card else match.group(0)


def _aws_secret(match: re.Match[str]) -> str:
    key = match.group(0)
    mixed = any(c.isupper() for c in key) and any(c.islower() for c in key)
    looks_random = mixed and any(c.isdigit() for c in key) and "//" not in key
    return "[REDACTED_KEY]" if looks_random and key[0] != "/" and key[-1] != "/" else key


def _iban(match: re.Match[str]) -> str:
    """The longest run of the match's groups that is an IBAN ("… 7034 OK": the word kept)."""
    text = match.group(0)
    ends = [len(text)] + [i for i in range(len(text) - 1, 0, -1) if text[i] == " "]
    for end in ends:
        if iban_ok(text[:end].replace(" ", "")):
            return "[IBAN]" + text[end:]
    return text


def _phone(match: re.Match[str]) -> str:
    return "[PHONE]" if phone_digits_ok(match.group(0)) else match.group(0)


#: the checked patterns, after :data:`REDACTIONS` (a card's digits are not a phone's)
CHECKED: list[tuple[LazyPattern, object]] = [
    (_AWS_SECRET, _aws_secret),
    (_IBAN, _iban),
    (_CARD, _card),
    (_PHONE, _phone),
]


def may_hold_secrets(text: str) -> bool:
    """False when no pattern can match ``text`` (most texts): nothing to do."""
    for part in _CASED_PARTS:
        if part in text:
            return True
    lowered = _caseless(text)
    for part in _CASELESS_PARTS:
        if part in lowered:
            return True
    if _has_key_word(text, lowered):
        return True
    return (
        _FOUR_DIGITS.search(text) is not None
        or _IBAN_START.search(text) is not None
        or (len(text) >= 40 and _FORTY.search(text) is not None)
    )


def _caseless(text: str) -> str:
    """``text`` lower-cased for the caseless substring tests, as ``re``'s IGNORECASE sees it:
    besides ASCII it takes "ı" and "İ" for "i" and "ſ" for "s" ("ſecret=…" is matched by the
    key pattern), which ``str.lower`` leaves as they are (or makes "i" + a combining dot)."""
    lowered = text.lower()
    if not text.isascii():
        lowered = lowered.replace("ı", "i").replace("ſ", "s").replace("i\u0307", "i")
    return lowered


def _has_key_word(text: str, lowered: str) -> bool:
    return any(word in lowered for word in _KEY_WORDS) and _KEY_WORD.search(text) is not None


#: for each pattern, a test that every text it can match passes (its fixed part, as
#: :func:`may_hold_secrets` looks for them), given the text and its :func:`_caseless` form
_NEEDS: dict[LazyPattern, Callable[[str, str], bool]] = dict(zip(
    [pattern for pattern, _ in [*REDACTIONS, *CHECKED]],
    [
        lambda text, _: "-----BEGIN" in text,
        lambda _, lowered: "authoriz" in lowered,
        lambda _, lowered: "bearer" in lowered,
        lambda text, _: "@" in text and "://" in text,
        lambda text, _: "k-" in text,
        lambda text, _: "AKIA" in text or "ASIA" in text,
        lambda text, _: "gh" in text or "github_pat" in text or "xox" in text,
        lambda text, _: "AIza" in text,
        lambda text, _: "eyJ" in text,
        lambda text, lowered: _has_key_word(text, lowered),
        lambda text, lowered: _has_key_word(text, lowered),
        lambda text, _: "@" in text,
        lambda text, _: len(text) >= 40 and _FORTY.search(text) is not None,
        lambda text, _: _IBAN_START.search(text) is not None,
        lambda text, _: _FOUR_DIGITS.search(text) is not None,
        lambda text, _: "+" in text,
    ],
    strict=True,
))


def redact(text: str, *, limit: int | None = None) -> str:
    """``text`` without secrets or personal numbers, optionally cut to ``limit`` characters.

    Memoised for short texts: an agent's reasons, summaries and prompts repeat a lot, and
    each text passes a dozen patterns (events re-check what a snapshot already cleaned).
    """
    if len(text) <= 2_048:
        return _redact_cached(text, limit)
    return _redact(text, limit)


@functools.lru_cache(maxsize=4_096)
def _redact_cached(text: str, limit: int | None) -> str:
    return _redact(text, limit)


#: Before matching, a text far past its limit is cut (matching a megabyte costs): at the
#: limit plus a margin that holds any short secret at the edge whole, and then on to the
#: end of the unbroken token the cut falls in, so that a long one (a JWT of a thousand
#: characters, a key=value) is matched whole too and never leaks its first part. A token
#: longer than ``_LONGEST_TOKEN`` is cut at that length.
_CUT_MARGIN = 256
_LONGEST_TOKEN = 65_536
_TOKEN_TAIL = LazyPattern(rf"\S{{0,{_LONGEST_TOKEN}}}")


def _redact(text: str, limit: int | None) -> str:
    if limit is not None and len(text) > limit + _CUT_MARGIN:
        end = limit + _CUT_MARGIN
        tail = _TOKEN_TAIL.compiled.match(text, end)
        text = text[: tail.end() if tail is not None else end]
    # each pattern only where its fixed part is (an id's four digits run the card pattern
    # alone, not all sixteen at 10-20 us each), judged on the text as the patterns before left it
    lowered = _caseless(text)
    for pattern, replacement in [*REDACTIONS, *CHECKED]:
        if _NEEDS[pattern](text, lowered):
            cleaned = pattern.sub(replacement, text)
            if cleaned != text:
                text, lowered = cleaned, _caseless(cleaned)
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text
