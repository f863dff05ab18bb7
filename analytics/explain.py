"""A risk score's reasons in words an operator can act on.

The model is linear in its features, so each feature's contribution to a task's log-odds
against its agent's typical input (weight × (value − typical value), :mod:`.reasons`) is
exact, and ``exp(contribution)`` is the factor it multiplies the failure odds by, other
things equal. :func:`contribution` names the feature as an
operator would, with the input's own numbers where it has them ("40 numbers in the
input, much more than triage-agent's usual", "the word 'chargeback'") and says which way,
how much and for whom ("×3.1 failure odds for triage-agent"). :func:`input_history`
words the input's own record (the nearest past failures there can be: the same input),
with the dashboard link to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from .fingerprints import FingerprintStats

SIZES = {"n_chars": "input length", "n_words": "word count", "n_lines": "line count",
         "n_numbers": "amount of numbers", "n_entities": "count of names"}
#: A size as counted in the input: "1,200 characters", "40 numbers".
UNITS = {"n_chars": "characters", "n_words": "words", "n_lines": "lines", "n_numbers": "numbers",
         "n_entities": "names"}
FLAGS = {"has_url": "a URL in the input", "has_email": "an e-mail address in the input",
         "has_code": "code in the input", "is_question": "the input is a question"}


def _count(size: str, raw: Mapping[str, Any] | None) -> str:
    """The input's own count of ``size`` ("1,200 characters"), or "" when not known."""
    value = (raw or {}).get(size)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    unit = UNITS.get(size, size)
    return f"{int(value):,} {unit.removesuffix('s') if int(value) == 1 else unit}"


def describe(name: str, value: float, raw: Mapping[str, Any] | None = None,
             names: Mapping[str, str] | None = None) -> str:
    """What a feature of :func:`~.classifier.feature_dict` means, in words.

    ``raw``: the input's features before the model's transformation
    (:func:`~retrylens.sdk.text.features.extract_input_features`), for its counts; ``names``: the
    input's words by their hashed feature (:func:`~.classifier.term_names`).
    """
    kind, _, rest = name.partition(":")
    if kind == "h":
        term = (names or {}).get(name)
        return f"the word{'s' if term and ' ' in term else ''} '{term}'" if term else "a word of the input"
    if kind in ("tok", "kw"):
        return f"the word{'s' if ' ' in rest else ''} '{rest}'"
    if kind == "tool":
        return f"mentions the tool {rest}"
    if kind == "size_z":
        size, _, agent = rest.partition("|")
        who = agent.removeprefix("agent=") or "its agent"
        how = "longer" if value > 0 else "shorter"
        much = "much " if abs(value) >= 1.5 else ""
        count = _count(size, raw)
        if count:
            more = "more" if value > 0 else "fewer"
            return f"{count} in the input, {much}{more} than {who}'s usual"
        return f"{SIZES.get(size, size)} {much}{how} than {who}'s usual input"
    if name.startswith("agent="):
        return f"agent {name[6:]}"
    if name.startswith("model="):
        return f"model {name[6:]}"
    if name.startswith("phase="):
        return f"starts in the {name[6:]} phase"
    if name.startswith("language="):
        return f"language {name[9:]}"
    if name == "fp_seen":
        return f"this input was seen before ({math.expm1(value):.0f} earlier tasks)"
    if name == "fp_failure_rate":
        return f"{value:.0%} of this input's earlier tasks failed"
    if name in SIZES:
        return f"{_count(name, raw) or SIZES[name]} in the input"
    return FLAGS.get(name, name)


def contribution(name: str, value: float, weight_times_value: float, *, agent: str = "",
                 raw: Mapping[str, Any] | None = None, names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``{feature, contribution, odds_factor, direction, words}`` for one feature of one task.

    ``words`` reads "<what>: ×3.1 failure odds for <agent>" (÷ when it lowers them).
    """
    factor = math.exp(max(-50.0, min(50.0, weight_times_value)))
    direction = f"×{factor:.2g} failure odds" if factor >= 1 else f"÷{1 / factor:.2g} failure odds"
    whom = f" for {agent}" if agent else ""
    return {"feature": name, "contribution": round(weight_times_value, 4), "odds_factor": round(factor, 4),
            "direction": "raises" if weight_times_value > 0 else "lowers",
            "words": f"{describe(name, value, raw, names)}: {direction}{whom}"}


def input_history(stats: FingerprintStats) -> dict[str, Any] | None:
    """The input's own earlier tasks (the nearest past failures), with the dashboard link; ``None`` if new."""
    if not stats.tasks:
        return None
    errors = ", ".join(stats.recent_error_types[:3]) or "no failure"
    return {"tasks": stats.tasks, "failed_tasks": stats.tasks_failed, "recent_error_types": stats.recent_error_types[:3],
            "words": f"this exact input ran {stats.tasks} time(s) before; {stats.tasks_failed} failed ({errors})",
            "link": "groups?" + urlencode({"project": stats.project, "fingerprint": stats.fingerprint})}
