"""Input features and fingerprints: the one function shared by events, training and scoring.

The agent computes these before a task starts, the classifier trains on them as stored
on events, and the risk API scores a new task with the same call — so there is no
training/serving skew. Only what is known before a run starts goes in: the task text and
who runs it, never anything about the run itself.

Nothing secret or personal becomes a feature: keywords and the word hashes (every content
word and word pair, :mod:`.word_hashes`) are taken from the input after
:func:`~retrylens.sdk.text.sanitizer.redact` (keys, tokens, passwords, cards, e-mails), with
capitalised words (names of people and places) and long letter-digit tokens (ids,
unrecognised secrets) left out — all in :func:`_content_words`, the one place text becomes
words, so a new redaction rule in the sanitizer reaches every word feature at once. Counts (``n_entities``) say that names were there.
References the input names (order numbers, SKUs) are there only hashed (``ref:``,
:mod:`.refs`, with what a hash of a short number does not hide).
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .lazy_pattern import LazyPattern
from .personal import COMMON_WORDS, redact_names
from .redaction import redact  # not via .sanitizer: that loads the failure classifier
from .refs import input_refs
from .word_hashes import (
    MAX_TERMS,
    SCOPE_WORDS,
    SKLEARN_ENGLISH_STOP_WORDS,
    content_terms,
    encode,
    term_hash,
)

if TYPE_CHECKING:
    import re

FeatureValue = bool | int | float | str

_WS = LazyPattern(r"\s+")
_WORD = LazyPattern(r"[a-z][a-z0-9_\-]{2,}")
_NUMBER = LazyPattern(r"\b\d+(?:[.,]\d+)?\b")
_URL = LazyPattern(r"https?://\S+")
_EMAIL = LazyPattern(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b")
_CAPITALISED = LazyPattern(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*\b")
_LETTER_WORD = LazyPattern(r"\b[^\W\d_][\w\-]*")  # a word that starts with a letter
_ASCII_LETTER = LazyPattern(r"[A-Za-z]")
_NEXT_CAPITALISED = LazyPattern(r"[ \t]+[^\W\d_a-z]")  # another capitalised word follows
MAX_KEYWORDS = 12

STOPWORDS = frozenset(
    """the and for are but not you all any can had her was one our out day get has him his how
    man new now old see two way who boy did its let put say she too use that with have this
    will your from they know want been good much some time very when come here just like long
    make many more only over such take than them well were what where which while would there
    their about after again also because before being between both could does doing down each
    few further into itself most other same should these those through under until upon whom
    why yours please need needs using used user users task tasks then than able""".split()
)
#: Words never hashed into the model's input (:mod:`.word_hashes`); the risk model drops the same.
CONTENT_STOP_WORDS = (SKLEARN_ENGLISH_STOP_WORDS | STOPWORDS) - SCOPE_WORDS


def normalise_input(text: str) -> str:
    """Case-, whitespace- and Unicode-insensitive form of a task input."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def input_fingerprint(text: str) -> str:
    """Stable 32-hex-digit id of a task input: equal after normalisation → equal id."""
    return hashlib.sha256(normalise_input(text).encode()).hexdigest()[:32]


def _safe_word(word: str) -> bool:
    if word in STOPWORDS or word.startswith("redacted"):
        return False
    # a long token mixing letters and digits is an id or a secret, not a topic
    return not (len(word) >= 8 and any(c.isdigit() for c in word))


def _sentence_start(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens the text, a line or a sentence (after ``.!?:``)."""
    before = text[:start].rstrip(" \t\"'(*-•")
    return not before or before[-1] in ".!?:\n"


def _drop_capitalised(text: str) -> str:
    """``text`` with capitalised words (in any script: "Álvarez", "CHEN") blanked: names are
    never features. A word capitalised only because it opens a sentence ("Wire the funds") is
    kept, lower-cased, when that tells nothing new: it is one of :data:`~.personal.COMMON_WORDS`
    or the same word is written lower-case elsewhere in the text. A word followed by another
    capitalised word ("Mei Chen asked") is a name's first part, never kept."""
    plain = {m.group(0) for m in _LETTER_WORD.compiled.finditer(text) if not m.group(0)[0].isupper()}

    def one(match: re.Match[str]) -> str:
        word = match.group(0)
        if not word[0].isupper():
            return word
        lower = word.lower()
        if (
            word[1:] == word[1:].lower()
            and _sentence_start(text, match.start())
            and (lower in plain or lower in COMMON_WORDS)
            and not _NEXT_CAPITALISED.compiled.match(text, match.end())
        ):
            return lower
        return " "

    return _LETTER_WORD.sub(one, text)


def _content_words(text: str) -> list[str]:
    """The redacted text's words in order, without names, ids or the SDK's stop words.

    The one hook where redaction happens before anything becomes a feature: both the
    keywords and the word hashes are read from this list, never from ``text`` itself."""
    cleaned = _drop_capitalised(redact_names(redact(text), " "))
    return [w for w in _WORD.findall(normalise_input(cleaned)) if _safe_word(w)]


def keywords(text: str, limit: int = MAX_KEYWORDS) -> list[str]:
    """Most frequent content words of the redacted text, without names (ties: first seen).

    For people reading an event; the model reads :func:`input_terms` (every word)."""
    return [w for w, _ in Counter(_content_words(text)).most_common(limit)]


def input_terms(text: str, limit: int = MAX_TERMS) -> list[str]:
    """Every content word of the redacted text, then adjacent word pairs, at most ``limit``
    (:mod:`.word_hashes`): what the model sees of the input, event or not."""
    return content_terms(_content_words(text), stop_words=CONTENT_STOP_WORDS, limit=limit)


def _language(text: str) -> str:
    """``en`` when over 90 % of the letters are ASCII, else ``other``; ``none`` with no letter.

    An ASCII text (most inputs) has only ASCII letters, so one search for a letter decides it
    instead of a loop over every character (on the risk API's path, per new input)."""
    if text.isascii():
        return "en" if _ASCII_LETTER.search(text) else "none"
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "none"
    ascii_share = sum(c.isascii() for c in letters) / len(letters)
    return "en" if ascii_share > 0.9 else "other"


def extract_input_features(
    text: str,
    *,
    agent: str = "",
    model: str = "",
    tools: Iterable[str] = (),
) -> dict[str, FeatureValue]:
    """Features of a task input, bounded to fit an event's ``input_features``.

    ``tools`` are the tools the agent may call; those the text names become ``tool:<name>``.
    At most 10 + 2 + 16 tools + 12 keywords + 4 references + 8 word-hash keys = 52 keys (an
    event holds 64). The ``wh*`` keys carry every content word and word pair of the input,
    hashed (:mod:`.word_hashes`, up to 680); the ``kw:`` keywords are the readable summary.
    """
    normalised = normalise_input(text)
    features: dict[str, FeatureValue] = {
        "n_chars": len(text),
        "n_words": len(normalised.split()),
        "n_lines": text.count("\n") + 1 if text else 0,
        "n_numbers": len(_NUMBER.findall(text)),
        "n_entities": len(_CAPITALISED.findall(text)),
        "has_url": bool(_URL.search(text)),
        "has_email": bool(_EMAIL.search(text)),
        "has_code": "```" in text or "def " in text,
        "is_question": text.rstrip().endswith("?"),
        "language": _language(text),
    }
    if agent:
        features["agent"] = agent[:128]
    if model:
        features["model"] = model[:128]
    for tool in sorted(set(tools))[:16]:
        if tool and tool.casefold() in normalised:
            features[f"tool:{tool[:58]}"] = True
    for word in keywords(text):
        features[f"kw:{word[:60]}"] = True
    for ref in input_refs(text):
        features[ref] = True
    features.update(encode(term_hash(term) for term in input_terms(text)))
    return features


@functools.lru_cache(maxsize=1024)
def task_features(
    goal: str, agent: str, model: str, tools: tuple[str, ...] = ()
) -> tuple[str, dict[str, FeatureValue]]:
    """Fingerprint and features of a task input, memoised: agents retry the same inputs a lot.

    The returned dict is shared between callers: treat it as read-only.
    """
    return input_fingerprint(goal), extract_input_features(
        goal, agent=agent, model=model, tools=tools
    )
