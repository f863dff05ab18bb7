"""Pre-check advice that the history shows helps inputs like this one, with the evidence.

A risk score alone does not say what to do: handing a risky task to a person loses every
task that would have succeeded, and a lower retry cap loses those a retry would have
saved. So each kind of advice is an action the governor takes, given only where the
stored history shows it pays for such inputs, and every answer carries the evidence:

- ``human_review`` (before spending) — the input itself failed every earlier time
  (at least :data:`MIN_FINGERPRINT_TASKS` tasks, or one when the risk is at least the
  ``human_review_threshold`` setting; all failed or handed off, with failure classes that
  retries do not fix, and none that this agent's retries clearly recovered from,
  :meth:`AgentEvidence.retries_fix`): running it again buys nothing a person
  would not have to redo. A risk alone never sends a task to a person. **Or a reference the
  input names** (an order number, a SKU: hashed ``ref:`` features) failed every earlier
  task of this agent that named it, often enough to rule chance out, with classes its
  retries do not fix (:mod:`.known_bad_refs`, book version 4; older books give none):
  the same bad order in a differently worded request.
- ``degrade_first`` (simplified mode from the first attempt) — the input is riskier than
  its agent's usual task (risk ≥ :func:`degrade_bar`: 1.5 × the agent's own failure rate,
  within 5-20 %; a fixed 0.2 never reached the agents that rarely fail), in this agent's history a
  simplified retry after an output failure (schema mismatch, validation, planning)
  succeeded clearly more often than any other retry (the 95 % lower bound of the
  difference above zero, at least :data:`MIN_RETRIES` of each), **and its extra spend is
  paid**: what simplified retries spent from the retry to the task's end, minus what the
  other retries spent, is at most the successes they added (that lower bound) times this
  agent's own price of a success (its spend per succeeded task). Simplified mode that
  saves a task also pays for the task's later steps; that is worth it only at the price a
  success normally costs. **And a simplified attempt fails less often than two plain attempts
  in a row** (the share of the agent's tasks whose first attempt failed on the output × the
  share of other retries that failed again): the SDK simplifies a task once, and simplified
  from the first attempt that one rescue is spent up front, so a task that then fails twice
  in a row is stopped as a loop where the plain run had a third, simplified attempt. Retries
  that beat other retries are no evidence for that trade: on the default fleet the
  extractor's simplified retries did (seeds 8 and 10), and simplified mode first for its
  tasks lost successes on every seed 7-13 (bench/RESULTS.md, session 10).
- ``no_retry_of`` (a tighter cap for one failure class) — in this agent's own history at
  least :data:`MIN_CLASS_TASKS` tasks were retried after a failure of that (non-transient)
  class and (almost) none of them succeeded later (95 % upper bound of the rate below
  :data:`CLASS_UNRECOVERABLE`), **and those retries clearly spent something** (mean spend
  of the attempts after that failure, 95 % lower bound above zero): a retry that costs
  nothing saves nothing when stopped (the default fleet's logic retries re-run only a
  free lookup; session 8 gave this cap to every support-agent task for no saving). The
  cap bites only on that class, so it needs no risk threshold. Another agent's record is
  no evidence here: what recovers depends on the work.
- ``lower_max_attempts`` (tighter cap) — the input is risky (risk ≥ :data:`CAP_AT`), in
  this agent's history tasks that had already failed ``cap`` times almost never
  succeeded later (upper 95 % bound of that rate below :data:`UNRECOVERABLE`), and the
  attempts after the ``cap``-th clearly spent something (as for ``no_retry_of``).

A kind whose spend the book did not record (a book written before spends were recorded)
is not given: its effect on cost is unknown.

:func:`build_advice_book` reads that history from the store once per training (it is
saved in the model's metadata, so a pre-check does no I/O for it); :func:`advise` turns a
risk, the fingerprint's record and the book into a
:class:`~retrylens.sdk.core.preflight.Recommendation` and the evidence in words. Advice with
no evidence is not given: before this, every risky input was handed to a person or capped,
and the demo's own A/B lost success for it (human review of "known-bad" inputs: −64
points of success on those tasks).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from retrylens.sdk.core.preflight import Recommendation

from .advice_book import build_advice_book
from .advice_evidence import (
    CAP_AT,
    MIN_RETRIES,
    MIN_SEGMENT_RETRIES,
    AgentEvidence,
    degrade_bar,
    evidence_for,
    own_evidence,
    segment_for,
)
from .failure_classes import persistence_of
from .fingerprints import FingerprintStats
from .known_bad_refs import RefEvidence, known_bad_ref

__all__ = ["KNOWN_BAD", "Advice", "AgentEvidence", "advise", "build_advice_book", "degrade_bar", "evidence_for",
           "hopeless", "model_uncertainty"]

MIN_FINGERPRINT_TASKS = 2


@dataclass(frozen=True)
class Advice:
    recommendation: Recommendation
    #: one entry per advice kind the history supports: {"advice", "action", "evidence", "status"}
    #: in words; ``status`` is ``given``, ``withheld`` or ``retired`` (see :func:`advise`)
    evidence: list[dict[str, str]]

    @property
    def kinds(self) -> list[str]:
        """The kinds given (withheld and retired ones are not)."""
        return [e["advice"] for e in self.evidence if e.get("status", "given") == "given"]

    @property
    def known_bad(self) -> bool:
        """Whether the answer's ``known_bad_fingerprint`` flag is given (it changes what the governor
        does, so it is advice like the others: counted, held out, retired by its measured effect)."""
        return KNOWN_BAD in self.kinds


KNOWN_BAD = "known_bad_input"


def model_uncertainty(meta: Mapping[str, Any] | None) -> float:
    """How far the model's risks were off on its held-out tasks: the calibration table's mean
    |mean predicted − observed| weighted by bin size (0 without a table). A risk within this of
    a threshold is on neither side of it, so no risk-based advice is given there."""
    table = (((meta or {}).get("metrics") or {}).get("calibration")) or []
    n = sum(int(row.get("n", 0)) for row in table)
    if not n:
        return 0.0
    return sum(int(row["n"]) * abs(float(row["mean_predicted"]) - float(row["observed"])) for row in table) / n



def hopeless(stats: FingerprintStats) -> bool:
    """Every earlier task of this input failed (at least :data:`MIN_FINGERPRINT_TASKS`), with
    failure classes retries do not fix: the pre-check's "known bad input"."""
    return (
        stats.tasks >= MIN_FINGERPRINT_TASKS
        and stats.tasks_failed >= stats.tasks
        and persistence_of(stats.recent_error_types) == "permanent"
    )


def _fixer(book: dict[str, Any] | None, project: str, agent: str, risk: float, margin: float) -> AgentEvidence:
    """The record that says whether retries fix a failure for an input of this risk: the tasks scored
    like it (:func:`segment_for`) where the book has them, else the agent's whole record."""
    segment = segment_for(book, project, agent, risk, margin)
    return own_evidence(book, project, agent) if segment is None or segment.evidence is None else segment.evidence


def _human_review(evidence: str) -> tuple[dict[str, Any], dict[str, str]]:
    return (
        {"human_review": True, "max_attempts": 1},
        {
            "advice": "human_review",
            "action": "hand to a person before the first attempt",
            "evidence": evidence,
        },
    )


def _candidates(
    risk: float,
    stats: FingerprintStats,
    project: str,
    agent: str,
    book: dict[str, Any] | None,
    human_review_threshold: float,
    refs: Mapping[str, str],
    margin: float = 0.0,
) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Each kind the history supports for this input: ``(recommendation fields, entry in words)``.

    A risk threshold is passed only by ``margin`` (:func:`model_uncertainty`) or more."""
    own = own_evidence(book, project, agent)
    segment = segment_for(book, project, agent, risk, margin)
    fixes = _fixer(book, project, agent, risk, margin)
    failed_once = (
        risk >= human_review_threshold + margin
        and stats.tasks >= 1
        and stats.tasks_failed >= stats.tasks
        and persistence_of(stats.recent_error_types) == "permanent"
    )
    if (hopeless(stats) or failed_once) and not fixes.retries_fix(stats.recent_error_types):
        return [
            _human_review(
                f"risk {risk:.0%}; this input failed in all {stats.tasks} earlier task(s) "
                f"({', '.join(stats.recent_error_types[:3]) or 'unclassified'}, not transient)"
            )
        ]
    ref_record = ((book or {}).get("refs") or {}).get(f"{project}/{agent}") if refs else None
    if ref_record:
        words = known_bad_ref(refs, RefEvidence.from_dict(ref_record), own, agent)
        if words is not None:
            return [_human_review(f"risk {risk:.0%}; {words}")]
    out: list[tuple[dict[str, Any], dict[str, str]]] = []
    if segment is not None and segment.evidence is None:
        return out  # the risk is on neither side of the segments' bar: neither record speaks for it
    # a segmented agent's kinds are read from the tasks scored like this one (:mod:`.advice_segments`)
    record, whose = (own, f"{agent}'s history") if segment is None else (segment.evidence, segment.words)
    class_caps = record.class_caps(own.price_of_success)
    if class_caps:
        out.append(
            (
                {"caps": {cls: 0 for cls, _ in class_caps}},
                {
                    "advice": "no_retry_of",
                    "action": "no retry of " + ", ".join(c for c, _ in class_caps) + " failures",
                    "evidence": f"{whose}: " + "; ".join(w for _, w in class_caps),
                },
            )
        )
    evidence, level = evidence_for(book, project, agent)
    least = MIN_RETRIES
    if segment is not None and record.relaxed_n >= MIN_SEGMENT_RETRIES and record.other_n >= MIN_RETRIES:
        evidence, level, least = record, whose, MIN_SEGMENT_RETRIES
    bar, usual = degrade_bar(own)
    if risk >= bar + margin:
        helps, words = evidence.degrade_helps(record, whose if segment else f"{agent}'s own tasks",
                                              min_relaxed=least)
        if helps:
            out.append(
                (
                    {"degrade_first": True},
                    {
                        "advice": "degrade_first",
                        "action": "simplified mode from the first attempt",
                        "evidence": f"risk {risk:.0%}, riskier than {usual}; {level}: {words}",
                    },
                )
            )
    if risk >= CAP_AT + margin:
        cap, words = (evidence if segment is None else record).cap()
        if cap is not None:
            out.append(
                (
                    {"max_attempts": cap},
                    {
                        "advice": "lower_max_attempts",
                        "action": f"at most {cap} attempt(s)",
                        "evidence": f"risk {risk:.0%}; {level if segment is None else whose}: {words}",
                    },
                )
            )
    return out


def advise(
    risk: float,
    stats: FingerprintStats,
    *,
    project: str,
    agent: str,
    book: dict[str, Any] | None,
    human_review_threshold: float,
    holdout: bool = False,
    refs: Mapping[str, str] | None = None,
    margin: float = 0.0,
) -> Advice:
    """The advice for one pre-checked task, each kind only where the evidence says it pays.

    Every entry carries a ``status``: ``given``; ``retired`` (the book's measured effect of
    that kind on earlier pre-checks says it does not help: :mod:`.advice_effects`, with the
    figures as its evidence); or ``withheld`` (``holdout``: this task is one of the few the
    advice is withheld from, so that its effect can be measured at all).

    ``refs``: ``{ref feature: token}`` of this input (:func:`retrylens.sdk.text.refs.input_refs`),
    read against the book's known-bad references; the token names it in the evidence.
    ``margin``: the model's own uncertainty (:func:`model_uncertainty`); risk-based advice needs
    the risk past its threshold by at least that. An input that failed every earlier time
    (:func:`hopeless`) with failures this agent's retries do not fix gets the ``known_bad_input``
    kind (the answer's ``known_bad_fingerprint`` flag), held out and retired like the others.
    """
    retired = (book or {}).get("retired") or {}
    rec: dict[str, Any] = {}
    entries: list[dict[str, str]] = []
    candidates = _candidates(risk, stats, project, agent, book, human_review_threshold, refs or {}, margin)
    if hopeless(stats) and not _fixer(book, project, agent, risk, margin).retries_fix(stats.recent_error_types):
        candidates.append(({}, {"advice": KNOWN_BAD, "action": "the governor records this input as known bad "
                                "(its failures are not retried as if new)",
                                "evidence": f"this input failed in all {stats.tasks} earlier task(s) "
                                            f"({', '.join(stats.recent_error_types[:3]) or 'unclassified'})"}))
    for fields, entry in candidates:
        kind = entry["advice"]
        if kind in retired:
            entries.append(
                {
                    **entry,
                    "status": "retired",
                    "evidence": f"retired: measured on earlier pre-checks, {retired[kind]}",
                }
            )
        elif holdout:
            entries.append(
                {
                    **entry,
                    "status": "withheld",
                    "evidence": f"withheld from this task to measure its effect; {entry['evidence']}",
                }
            )
        else:
            rec.update(fields)
            entries.append({**entry, "status": "given"})
    return Advice(Recommendation(**rec), entries)
