"""References an input names (order numbers, SKUs, account or ticket ids) as hashed features.

Why: a reference that does not exist or is blocked fails every task that names it, with a
permanent error no retry fixes, however the rest of the text is worded. The exact-input
fingerprint catches only word-for-word repeats, and keywords never hold ids (they start
with a letter, and long letter-digit tokens are dropped as possible secrets). So the
server can only learn "this order number always fails" if the reference itself is on the
task's events.

What is taken, and what is not (privacy):

- tokens of the input *after* :func:`~retrylens.sdk.text.sanitizer.redact` (keys, tokens,
  passwords, cards and e-mails are gone first), casefolded;
- that contain a digit and are :data:`MIN_REF_CHARS`–:data:`MAX_REF_CHARS` characters long
  (long tokens, where unrecognised secrets live, are never taken), at most :data:`MAX_REFS`
  per input, in the order they appear;
- each as ``ref:<12 hex digits of its SHA-256>``, never the token itself. A hash hides a
  long random id; it does **not** hide a short number (a 4-digit order number is found by
  hashing all 10,000): treat a ``ref:`` feature as no more secret than the reference.

The risk model never reads these (one reference's weight is one entity's outcome
remembered, :mod:`retrylens.analytics.word_features`); the advice book counts the tasks
naming each one (:mod:`retrylens.analytics.known_bad_refs`).
"""

from __future__ import annotations

import functools
import hashlib

from .lazy_pattern import LazyPattern
from .redaction import redact  # not via .sanitizer: that loads the failure classifier

REF_PREFIX = "ref:"
MIN_REF_CHARS = 3
MAX_REF_CHARS = 16
MAX_REFS = 4
#: letters and digits, joined by ``-``, ``_``, ``.`` or ``/`` ("c-105", "19.99", "ab/2024/7")
_TOKEN = LazyPattern(r"[^\W_]+(?:[\-_./][^\W_]+)*")


def ref_feature(token: str) -> str:
    """The feature name of one reference token (casefolded before hashing)."""
    return REF_PREFIX + hashlib.sha256(token.casefold().encode()).hexdigest()[:12]


def _is_ref(token: str) -> bool:
    return MIN_REF_CHARS <= len(token) <= MAX_REF_CHARS and any(c.isdigit() for c in token)


@functools.lru_cache(maxsize=1024)
def input_refs(text: str) -> dict[str, str]:
    """``{ref feature: token}`` of the references in ``text`` (at most :data:`MAX_REFS`).

    The token is returned for the caller's own words ("names 'SKU-4411'"); only the feature
    name leaves the process on events. The dict is shared between callers: read-only."""
    out: dict[str, str] = {}
    for token in _TOKEN.findall(redact(text).casefold()):
        if len(out) >= MAX_REFS:
            break
        if _is_ref(token):
            out.setdefault(ref_feature(token), token)
    return out
