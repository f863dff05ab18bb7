"""The input's whole vocabulary as word hashes: every content word and adjacent word pair.

Why: an event used to carry only the input's 12 most frequent words (``kw:``), so a word of
a long prompt that occurs once ("wire" among 17 content words) never reached the model,
and which words did was decided by alphabetical order. Here every content word and every
adjacent pair of content words (stop words dropped first: "wire the funds" → "wire funds")
is kept, each as an 18-bit hash, in order of first occurrence: all words first, then the
pairs, up to :data:`MAX_TERMS` (680). A 17-content-word prompt needs 33; a tau-bench
conversation's opening a few hundred. Past the cap the latest pairs are what is lost, never
a word of the opening.

Compact: a hash is 3 characters (base64url), packed :data:`HASHES_PER_KEY` (85) to a value
in :data:`KEYS` (``wh0`` … ``wh7``) of the event's ``input_features`` (a 256-character
string each), so the event schema (v1) does not change: 8 keys, at most 2 KB.

The text is the one :func:`~retrylens.sdk.text.features.extract_input_features` reads: redacted
first (:func:`~retrylens.sdk.text.sanitizer.redact`), capitalised words (names) and long
letter-digit tokens (ids) left out, so nothing secret or personal is hashed. A hash of a
dictionary word is not secret; the point is size, not hiding. The server turns a hash back
into the word only where it has the text (the pre-check), by hashing that text's terms.

:data:`STOP_WORDS` is scikit-learn's English list (``ENGLISH_STOP_WORDS``, BSD-3-Clause,
copied so the SDK does not import scikit-learn; a test holds the copy equal) plus the
SDK's keyword stop list, less the scope words ("every", "all": how open-ended a task is).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping

SKLEARN_ENGLISH_STOP_WORDS = frozenset(
    """
    a about above across after afterwards again against all almost alone along already also
    although always am among amongst amoungst amount an and another any anyhow anyone
    anything anyway anywhere are around as at back be became because become becomes becoming
    been before beforehand behind being below beside besides between beyond bill both bottom
    but by call can cannot cant co con could couldnt cry de describe detail do done down due
    during each eg eight either eleven else elsewhere empty enough etc even ever every
    everyone everything everywhere except few fifteen fifty fill find fire first five for
    former formerly forty found four from front full further get give go had has hasnt have
    he hence her here hereafter hereby herein hereupon hers herself him himself his how
    however hundred i ie if in inc indeed interest into is it its itself keep last latter
    latterly least less ltd made many may me meanwhile might mill mine more moreover most
    mostly move much must my myself name namely neither never nevertheless next nine no
    nobody none noone nor not nothing now nowhere of off often on once one only onto or
    other others otherwise our ours ourselves out over own part per perhaps please put
    rather re same see seem seemed seeming seems serious several she should show side since
    sincere six sixty so some somehow someone something sometime sometimes somewhere still
    such system take ten than that the their them themselves then thence there thereafter
    thereby therefore therein thereupon these they thick thin third this those though three
    through throughout thru thus to together too top toward towards twelve twenty two un
    under until up upon us very via was we well were what whatever when whence whenever
    where whereafter whereas whereby wherein whereupon wherever whether which while whither
    who whoever whole whom whose why will with within without would yet you your yours
    yourself yourselves
    """.split()
)
#: Universal quantifiers: they say how open-ended a task is, so they are kept.
SCOPE_WORDS = frozenset({"all", "any", "each", "every", "everything", "everyone", "everywhere"})
HASH_BITS = 18
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_CODE = {c: i for i, c in enumerate(_ALPHABET)}
HASH_CHARS = 3  # 3 × 6 bits = HASH_BITS
HASHES_PER_KEY = 85  # 255 of a feature value's 256 characters
KEYS = tuple(f"wh{i}" for i in range(8))
#: The most terms (words, then word pairs) an input carries: 8 × 85.
MAX_TERMS = len(KEYS) * HASHES_PER_KEY


def term_hash(term: str) -> int:
    """The stable 18-bit hash of a word or a word pair (CRC-32, the same in every process)."""
    return zlib.crc32(term.encode()) & ((1 << HASH_BITS) - 1)


def content_terms(words: Iterable[str], *, stop_words: frozenset[str], limit: int = MAX_TERMS) -> list[str]:
    """Unique content words in order of first occurrence, then unique adjacent pairs, at most ``limit``."""
    kept = [w for w in words if w not in stop_words]
    unique = list(dict.fromkeys(kept))
    if len(unique) >= limit:
        return unique[:limit]
    pairs = dict.fromkeys(f"{a} {b}" for a, b in zip(kept, kept[1:], strict=False) if a != b)
    return [*unique, *list(pairs)[: limit - len(unique)]]


def encode(hashes: Iterable[int]) -> dict[str, str]:
    """Hashes packed into the ``wh*`` feature values (unique, in the given order)."""
    text = "".join(_encode_one(h) for h in dict.fromkeys(hashes))[: MAX_TERMS * HASH_CHARS]
    step = HASHES_PER_KEY * HASH_CHARS
    return {key: text[i : i + step] for key, i in zip(KEYS, range(0, len(text), step), strict=False)}


def _encode_one(value: int) -> str:
    return "".join(_ALPHABET[(value >> shift) & 63] for shift in (12, 6, 0))


def decode(features: Mapping[str, object]) -> list[int]:
    """The hashes an event's ``input_features`` carry (none when it has no ``wh*`` key)."""
    out: list[int] = []
    for key in KEYS:
        value = features.get(key)
        if not isinstance(value, str):
            break
        for i in range(0, len(value) - HASH_CHARS + 1, HASH_CHARS):
            a, b, c = (_CODE.get(ch, 0) for ch in value[i : i + HASH_CHARS])
            out.append((a << 12) | (b << 6) | c)
    return out
