"""Which words may become risk-model features: content words seen in several training tasks.

Why: trained on raw tokens, the model's strongest word weights were stop words ("the",
"if", "you", the fleet's "every", "since") and words of a single task ("number only",
"antidisestablishmentarianism"). A stop word's weight is the style of a source, not a
property of the task; a one-task word's weight is that task's outcome remembered. Neither
generalises to unseen tasks, and neither means anything to an operator reading "why".

Three filters:

- :data:`STOP_WORDS` (scikit-learn's English list plus the SDK's keyword stop list) are
  never features: dropped from the text tokens before word pairs are formed ("cancel the
  order" gives "cancel order") and from stored ``kw:`` keywords;
- :class:`Vocabulary`, fitted on the training rows (inside each cross-validation fold on
  its training side only, and saved in the model), keeps the word features that occur in
  at least :data:`MIN_WORD_TASKS` distinct training tasks (the ``groups``; rows when there
  are none). Everything else about a row passes unchanged;
- :func:`unsupported`, after a first fit: a word whose weight raises the risk but that
  occurs in fewer than :data:`MIN_WORD_SUPPORT` distinct *failed* training tasks (or
  lowers it with fewer successful ones) is dropped and the model refitted. Why: the ≥ 3
  tasks rule lets a word of 19 tasks, one of them failed, through; next to its agent's
  other words that one failure gave it the demo's third-largest weight ("log" of "Cannot
  log in", "c-105", a cart id). A weight that one or two tasks make is their outcome
  remembered, not a property of the word.

Scope words (:data:`SCOPE_WORDS`: "every", "all", "each", ...) are on scikit-learn's list
but are kept: how open-ended a task is ("for every country since 1990", "all known
approaches") is a property of the task, and without them the model leaned on the words
next to them ("country", "year", "vendors"), each a weaker, narrower proxy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from retrylens.sdk.text.features import CONTENT_STOP_WORDS
from retrylens.sdk.text.word_hashes import SCOPE_WORDS

__all__ = ["SCOPE_WORDS", "STOP_WORDS"]

#: scikit-learn's English list plus the SDK's keyword stop list, less :data:`SCOPE_WORDS`: the
#: SDK drops the same before hashing an input's words (:mod:`retrylens.sdk.text.word_hashes`).
STOP_WORDS = CONTENT_STOP_WORDS
WORD_PREFIXES = ("tok:", "kw:", "h:")
#: A word (or word pair) must occur in this many distinct training tasks to be a feature.
MIN_WORD_TASKS = 3
#: A word that raises (lowers) the risk must occur in this many distinct failed (successful) training tasks.
MIN_WORD_SUPPORT = 3


def is_word(name: str) -> bool:
    return name.startswith(WORD_PREFIXES)


def is_stop_word(word: str) -> bool:
    """A stop word, or a word pair containing one."""
    return any(part in STOP_WORDS for part in word.split())


@dataclass(frozen=True)
class Vocabulary:
    """The word features of enough distinct training tasks (see the module docstring)."""

    words: frozenset[str]
    min_tasks: int = MIN_WORD_TASKS

    @classmethod
    def fit(cls, dicts: Sequence[Mapping[str, float]], groups: Sequence[str] | None = None, *,
            min_tasks: int = MIN_WORD_TASKS) -> Vocabulary:
        seen: dict[str, set[object]] = {}
        for number, fdict in enumerate(dicts):
            group: object = groups[number] if groups is not None else number
            for name in fdict:
                if name.startswith(WORD_PREFIXES):  # is_word, inline: called for every key of every row
                    seen.setdefault(name, set()).add(group)
        return cls(frozenset(name for name, tasks in seen.items() if len(tasks) >= min_tasks), min_tasks)

    def apply(self, fdict: Mapping[str, float]) -> dict[str, float]:
        """``fdict`` without the word features outside the vocabulary."""
        words = self.words
        return {name: value for name, value in fdict.items()
                if name in words or not name.startswith(WORD_PREFIXES)}


def unsupported(weights: Mapping[str, float], dicts: Sequence[Mapping[str, float]], labels: Sequence[int],
                groups: Sequence[str] | None = None, *, min_support: int = MIN_WORD_SUPPORT) -> frozenset[str]:
    """The words of ``weights`` whose sign fewer than ``min_support`` distinct tasks of that
    outcome back: a positive weight needs failed tasks (label 1), a negative one successful."""
    seen: dict[str, tuple[set[object], set[object]]] = {}
    for number, (fdict, label) in enumerate(zip(dicts, labels, strict=True)):
        group: object = groups[number] if groups is not None else number
        for name in fdict:
            if name in weights:
                seen.setdefault(name, (set(), set()))[1 if label else 0].add(group)
    out = set()
    for name, weight in weights.items():
        ok, failed = seen.get(name, (set(), set()))
        if (weight > 0 and len(failed) < min_support) or (weight < 0 and len(ok) < min_support):
            out.add(name)
    return frozenset(out)
