"""A policy-report verdict in words, for every reader of the report.

The CLI line, the offline HTML report and the dashboard's reports page each print the
verdicts of :func:`retrylens.evaluation.report.recommend`; one module words them so the three
never say a verdict differently, and so a candidate's per-agent verdicts (where an agent's own
tasks disagree with the fleet's) reach every reader, not only the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Each verdict in words, as the CLI line, the HTML report and the dashboard print it.
VERDICT_WORDS = {"better": "better beyond the margin", "cheaper": "cheaper beyond the margin",
                 "below_margin": "a gain too small to act on (below the margin)",
                 "within_uncertainty": "no difference beyond the uncertainty", "worse": "worse",
                 "leans_on_imputation": "leans on imputation",
                 "not_supported": "not supported by the log"}


def verdict_words(verdict: Mapping[str, Any]) -> str:
    """The verdict's words; an unknown verdict key is shown as it is, a missing one as ``—``."""
    key = str(verdict.get("verdict", "") or "")
    return VERDICT_WORDS.get(key, key or "—")


def verdict_text(verdict: Mapping[str, Any]) -> str:
    """The verdict's words, then why, saying the words once.

    A ``why`` may open with the words ("not supported by the log: …") or end with them
    ("… cost per task …: no difference beyond the uncertainty"); either way they are not
    repeated in front of it.
    """
    words, why = verdict_words(verdict), str(verdict.get("why", "") or "")
    if not why:
        return words
    if why.startswith(f"{words}:") or why.endswith(f": {words}"):
        return why
    return f"{words}: {why}"


def differing_agents(verdict: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The candidate's per-agent verdicts, when any agent's differs from the fleet's; else none.

    Where every agent agrees with the fleet, the fleet line says it all; where one differs,
    each agent is listed so the reader sees the whole split, not only the odd one out.
    """
    by_agent = verdict.get("by_agent") or {}
    if not isinstance(by_agent, Mapping):
        return []
    if any(isinstance(av, Mapping) and av.get("verdict") != verdict.get("verdict") for av in by_agent.values()):
        return [(str(agent), av) for agent, av in by_agent.items() if isinstance(av, Mapping)]
    return []
