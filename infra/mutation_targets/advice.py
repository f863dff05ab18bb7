"""Mutation targets of the pre-check's advice: what an agent is told to do before it spends
(hand to a person, simplified mode first, a tighter cap, no retry of a class), the evidence
each kind needs, the risk segments it is read per, known-bad references, and the words a
risk's reasons are given in (issue 38 round two: "every module that carries a guarantee";
session 17 added them to ``coverage.GUARANTEE_MODULES``).

Pure tests first, so ``-x`` stops most mutants there; the store-backed ones (the book's SQL)
cost a chDB store a mutant.
"""

from __future__ import annotations

from .target import Equivalent, Target

_ADVICE = "tests/analytics/test_analytics_advice.py"
_MEMO = "tests/analytics/test_advice_evidence_memo.py"
_SEGMENTS = "tests/analytics/test_advice_segments.py"

TARGETS: dict[str, Target] = {
    "advice": Target(
        "analytics/advice.py",
        ("model_uncertainty", "hopeless", "_fixer", "_human_review", "_candidates", "advise"),
        (_ADVICE, _MEMO, "tests/analytics/test_known_bad_refs.py"),
    ),
    "advice_evidence": Target(
        "analytics/advice_evidence.py",
        ("_mean_ci", "price_of_success", "degrade_helps", "cap", "class_caps", "retries_fix", "_wilson",
         "_difference_lo", "_wilson_hi", "_add", "_sum", "_kept", "own_evidence", "evidence_for",
         "_closest_history", "degrade_bar", "segment_for", "_segments_of"),
        (_ADVICE, _MEMO, _SEGMENTS),
    ),
    "advice_segments": Target(
        "analytics/advice_segments.py",
        ("risk_segments",),
        (_SEGMENTS,),
    ),
    "advice_book": Target(
        "analytics/advice_book.py",
        ("build_advice_book", "book_for_projects"),
        ("tests/analytics/test_advice_book.py", _SEGMENTS),
    ),
    "known_bad_refs": Target(
        "analytics/known_bad_refs.py",
        ("needed_tasks", "ref_book", "known_bad_ref", "_decisive"),
        ("tests/analytics/test_known_bad_refs.py",),
    ),
    "explain": Target(
        "analytics/explain.py",
        ("_count", "describe", "contribution", "input_history"),
        ("tests/api/test_api_precheck_explained.py",),
    ),
}

EQUIVALENT: Equivalent = {
    ("analytics/advice_book.py", "build_advice_book", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def build_advice_book(store: EventStore, where: Slice = Slice(), segments: Segments & None = None)"
     " -> dict[str, Any]:"): "an annotation, never evaluated (from __future__ import annotations)",
    ("analytics/advice_book.py", "book_for_projects", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def book_for_projects(book: dict[str, Any], projects: frozenset[str] & None) -> dict[str, Any]:"):
        "an annotation, never evaluated (from __future__ import annotations)",}
