"""Mutation targets: what the SDK redacts before an event leaves the process: the sanitizer, names, processors (issue 25)."""

from __future__ import annotations

from .target import Equivalent, Target

TARGETS: dict[str, Target] = {
    "sanitizer": Target(
        "sdk/sanitizer.py",
        ("_luhn_ok", "_card", "redact", "_redact", "_status_type", "_classify_type", "classify"),
        ("tests/sdk/test_sdk_redaction.py", "tests/sdk/test_sdk_stories.py"),
    ),
    "cards": Target(
        "sdk/sanitizer.py", ("_luhn_ok", "_card"), ("tests/sdk/test_sdk_redaction.py",)
    ),
    "personal": Target(
        "sdk/personal.py",
        ("_capitalised", "_capitals", "_kind", "find_names", "_gap", "_name_at", "_redact_names"),
        ("tests/sdk/test_sdk_redaction.py",),
    ),
    "processors": Target(
        "sdk/processors.py",
        ("_clean", "__call__", "_clean_snapshot", "process"),
        ("tests/sdk/test_sdk_redaction.py", "tests/sdk/test_sdk_stories.py"),
    ),
}

EQUIVALENT: Equivalent = {
    (
        "sdk/sanitizer.py",
        "_luhn_ok",
        "core/ReplaceComparisonOperator_Eq_Is",
        "if i % 2 is parity:",
    ): "0 and 1 are cached int objects in CPython: `is` and `==` agree on them",
    (
        "sdk/sanitizer.py",
        "_luhn_ok",
        "core/ReplaceComparisonOperator_Eq_LtE",
        "return total % 10 <= 0",
    ): "a remainder modulo 10 is never negative: <= 0 is == 0",
}
