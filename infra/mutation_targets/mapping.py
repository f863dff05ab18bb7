"""Mutation targets: what outside input is mapped to (OTLP spans) and what reports decide (issue 25)."""

from __future__ import annotations

from .target import Equivalent, Target

TARGETS: dict[str, Target] = {
    "otlp": Target(
        "api/otlp.py",
        ("classify", "is_operation"),
        ("tests/api/test_otlp_status_codes.py", "tests/api/test_otlp.py"),
    ),
}

EQUIVALENT: Equivalent = {}
