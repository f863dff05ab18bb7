"""Which of an agent's stored tasks the model scores risky: the two segments the advice book reads apart.

Why: an agent's history pooled over all its tasks answers the wrong question for a risky input.
On the planted scenario (bench/planted_precheck_ab.py, seed 7) the retries after a validation
failure of the short agent almost never recovered because most of those failures were its
planted, risky tasks; the ``no_retry_of`` cap read from that pool went to every task of the
agent, and the few ordinary tasks that did fail on validation lost the retry that would have
saved them (−13 successes), while simplified mode, which helps the risky tasks, was not given
because the agent's ordinary retries diluted its evidence. Read per segment — the tasks the
model scores at or above the agent's bar, and the rest — each kind is judged on the tasks it
would be given to.

The bar is :func:`~.advice_evidence.degrade_bar`'s: :data:`~.advice_evidence.DEGRADE_RELATIVE`
times the agent's failure rate, within 5-20 %, the same line from which an input counts as
"riskier than its agent's usual task". The risks are the new model's own on the tasks it was
trained on (in sample: the book is built once per training, with no model of its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .advice_evidence import AgentEvidence, degrade_bar

#: a segment needs this many tasks on each side, or the book keeps only the agent's pooled record
MIN_SEGMENT_TASKS = 20


@dataclass(frozen=True)
class Segments:
    """Per ``project/agent``: the bar and the task ids scored at or above it."""

    bars: dict[str, float]
    high: dict[str, frozenset[str]]

    def high_ids(self) -> list[str]:
        """Every high-risk task id (the book's SQL marks them with one ``IN`` test)."""
        return sorted({t for ids in self.high.values() for t in ids})


def risk_segments(keys: Sequence[str], task_ids: Sequence[str], risks: Sequence[float],
                  labels: Sequence[int]) -> Segments:
    """The segments of each agent (``keys``: ``project/agent`` per task) from the model's ``risks``
    and the tasks' outcomes (``labels``: 1 failed). An agent with fewer than
    :data:`MIN_SEGMENT_TASKS` on either side gets none: its record stays pooled."""
    by_agent: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        by_agent.setdefault(key, []).append(i)
    bars: dict[str, float] = {}
    high: dict[str, frozenset[str]] = {}
    for key, rows in by_agent.items():
        failed = sum(labels[i] for i in rows)
        bar, _ = degrade_bar(AgentEvidence(tasks=len(rows), succeeded=len(rows) - failed))
        ids = frozenset(task_ids[i] for i in rows if risks[i] >= bar)
        if MIN_SEGMENT_TASKS <= len(ids) <= len(rows) - MIN_SEGMENT_TASKS:
            bars[key], high[key] = bar, ids
    return Segments(bars, high)
