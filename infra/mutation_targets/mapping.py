"""Mutation targets: what outside input is mapped to (OTLP spans) and what reports decide (issue 25)."""

from __future__ import annotations

from .target import Equivalent, Target

TARGETS: dict[str, Target] = {
    "otlp": Target(
        "api/otlp.py",
        (
            "is_operation",
            "trace_events",
            "_operation_kind",
            "of",
            "http_requests",
            "_is_http",
            "failed",
            "_status",
            "_attempt",
            "classify",
            "_event",
            "_ms",
            "_int",
        ),
        # --noconftest: these tests need no fixture, and the conftests (the app, the store)
        # cost four times the tests' own run on every mutant
        (
            "--noconftest",
            "tests/api/test_otlp_mapping_guarantees.py",
        ),
    ),
    "recommendation": Target(
        "evaluation/report.py",
        ("_evidence", "__post_init__", "_verdict", "recommend"),
        (
            "--noconftest",
            "tests/evaluation/test_eval_recommend.py",
            "tests/evaluation/test_recommend_guarantees.py",
        ),
    ),
}

EQUIVALENT: Equivalent = {}
