"""A pre-check reads a loaded model's advice book without parsing it again.

Why: every pre-check parsed every agent of the book and pooled it three ways
(:func:`evidence_for`): ~0.1 ms of a ~0.2 ms scoring, on the request path. A book is a
loaded model's read-only metadata, so each answer is kept per book object; another book
(a new model) is read afresh, and what is kept equals what a fresh read gives.
"""

from __future__ import annotations

import copy
from typing import Any

from retrylens.analytics.advice import AgentEvidence, evidence_for
from retrylens.analytics.advice_evidence import own_evidence


def _book(relaxed_ok: int) -> dict[str, Any]:
    agent = AgentEvidence(relaxed_ok, 20, 5, 20, {1: (30, 3)}, tasks=100, succeeded=80, spent=1.0,
                          first_failed=10)
    other = AgentEvidence(2, 12, 6, 12, tasks=50, succeeded=45, spent=0.5, first_failed=4)
    return {"version": 4, "agents": {"shop/support": agent.as_dict(), "shop/checkout": other.as_dict()}}


def test_a_book_is_read_once_per_agent() -> None:
    book = _book(15)
    first = evidence_for(book, "shop", "support")
    assert evidence_for(book, "shop", "support") is first
    assert own_evidence(book, "shop", "support") is own_evidence(book, "shop", "support")


def test_what_is_kept_equals_a_fresh_read() -> None:
    book = _book(15)
    for project, agent in (("shop", "support"), ("shop", "checkout"), ("shop", "unknown"), ("ops", "x")):
        kept = evidence_for(book, project, agent), own_evidence(book, project, agent)
        fresh_book = copy.deepcopy(book)  # another object: read afresh
        assert (evidence_for(fresh_book, project, agent), own_evidence(fresh_book, project, agent)) == kept


def test_another_book_is_not_answered_from_the_first() -> None:
    a, b = _book(15), _book(3)
    assert evidence_for(a, "shop", "support")[0].relaxed_ok == 15
    assert evidence_for(b, "shop", "support")[0].relaxed_ok == 3
    assert own_evidence(b, "shop", "support").relaxed_ok == 3


def test_no_book_or_an_empty_one_reads_as_no_history() -> None:
    for book in (None, {}, {"agents": {}}):
        evidence, _ = evidence_for(book, "shop", "support")
        assert evidence.tasks == 0 and own_evidence(book, "shop", "support") == AgentEvidence()
