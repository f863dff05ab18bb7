"""A risk score's reasons as effects: each feature's contribution against its agent's typical input.

Why: a linear model's ``weight × value`` is exact, but for a feature every input has (the
agent, the language, the log of the input's size) it is mostly a constant — part of the
intercept — and listing it as a reason said "3,060 characters: ÷5.5 failure odds" for an
input of an ordinary size, with a sign that flipped between seeds. Measured against the
typical input of the same agent (:class:`TypicalInput`, the mean of each feature over that
agent's training rows, saved in the model), a feature contributes
``weight × (value − typical value)``: zero for a constant, the word's own effect for a word
the typical input lacks, and a size's effect only as far as this input's size differs from
the agent's usual one.

:func:`centred_reasons` keeps only features this input has (a word absent from it is never
its reason), one line per fact (the raw and the per-agent standardised form of one size
and every other count of the input's size are one fact, their effects summed), and only effects of at least
:data:`MIN_REASON_LOG_ODDS` (a factor of ×1.16 or ÷1.16 on the failure odds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

#: The smallest effect on the log-odds worth naming as a reason (×1.16 / ÷1.16 failure odds).
MIN_REASON_LOG_ODDS = 0.15
_ALL = ""


def agent_key(fdict: Mapping[str, float]) -> str:
    """The ``agent=<name>`` feature of a row ("" when it names none)."""
    return next((key for key in fdict if key.startswith("agent=")), _ALL)


SIZES = frozenset({"n_chars", "n_words", "n_lines", "n_numbers", "n_entities"})


def fact_of(name: str) -> str:
    """What a feature is a fact about: every count of the input's size (characters, words,
    lines, numbers, names; raw or per agent) is one fact, its size: they rise together, and
    two of them with opposite weights are one effect, not two."""
    if name.startswith("size_z:") or name in SIZES:
        return "size"
    return name


@dataclass(frozen=True)
class TypicalInput:
    """Each agent's mean model input over its training rows, and the mean over all rows.

    ``means[agent_key][feature]``; an agent not seen in training is read against all rows."""

    means: Mapping[str, Mapping[str, float]]

    @classmethod
    def fit(cls, rows: Sequence[Mapping[str, float]]) -> TypicalInput:
        sums: dict[str, dict[str, float]] = {}
        counts: dict[str, int] = {}
        for row in rows:
            for key in {agent_key(row), _ALL}:
                counts[key] = counts.get(key, 0) + 1
                total = sums.setdefault(key, {})
                for name, value in row.items():
                    total[name] = total.get(name, 0.0) + value
        return cls({key: {name: value / counts[key] for name, value in total.items()} for key, total in sums.items()})

    def of(self, fdict: Mapping[str, float]) -> Mapping[str, float]:
        """The typical input of this row's agent (of all rows for an unknown agent)."""
        return self.means.get(agent_key(fdict)) or self.means.get(_ALL, {})


def centred_reasons(fdict: Mapping[str, float], typical: Mapping[str, float], weight: Callable[[str], float], *,
                    top: int = 5, minimum: float = MIN_REASON_LOG_ODDS) -> list[tuple[str, float, float]]:
    """``(feature, value, centred contribution)``, strongest first, one per fact, present features only.

    A fact's line is named by its feature with the largest effect (a size's per-agent form
    when it has one, which says "more than usual"); its effect is the sum over the fact."""
    facts: dict[str, list[tuple[str, float, float]]] = {}
    for name, value in fdict.items():
        if not value:
            continue
        w = weight(name)
        if w:
            facts.setdefault(fact_of(name), []).append((name, value, w * (value - typical.get(name, 0.0))))
    out = []
    for parts in facts.values():
        effect = sum(c for _, _, c in parts)
        name, value, _ = max(parts, key=lambda part: (part[0].startswith("size_z:"), abs(part[2])))
        if abs(effect) >= minimum:
            out.append((name, value, effect))
    out.sort(key=lambda item: (-abs(item[2]), item[0]))
    return out[:top]
