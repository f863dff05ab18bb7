"""Which words may become risk-model features: content words seen in several training tasks.

Why: trained on raw tokens, the model's strongest word weights were stop words ("the",
"if", "you", the fleet's "every", "since") and words of a single task ("number only",
"antidisestablishmentarianism"). A stop word's weight is the style of a source, not a
property of the task; a one-task word's weight is that task's outcome remembered. Neither
generalises to unseen tasks, and neither means anything to an operator reading "why".

Two filters:

- :data:`STOP_WORDS` (scikit-learn's English list plus the SDK's keyword stop list) are
  never features: dropped from the text tokens before word pairs are formed ("cancel the
  order" gives "cancel order") and from stored ``kw:`` keywords;
- :class:`Vocabulary`, fitted on the training rows (inside each cross-validation fold on
  its training side only, and saved in the model), keeps the word features that occur in
  at least :data:`MIN_WORD_TASKS` distinct training tasks (the ``groups``; rows when there
  are none). Everything else about a row passes unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from retrylens.sdk.features import STOPWORDS as SDK_STOPWORDS

STOP_WORDS = frozenset(ENGLISH_STOP_WORDS) | SDK_STOPWORDS
WORD_PREFIXES = ("tok:", "kw:")
#: A word (or word pair) must occur in this many distinct training tasks to be a feature.
MIN_WORD_TASKS = 3


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
                if is_word(name):
                    seen.setdefault(name, set()).add(group)
        return cls(frozenset(name for name, tasks in seen.items() if len(tasks) >= min_tasks), min_tasks)

    def apply(self, fdict: Mapping[str, float]) -> dict[str, float]:
        """``fdict`` without the word features outside the vocabulary."""
        return {name: value for name, value in fdict.items() if not is_word(name) or name in self.words}
