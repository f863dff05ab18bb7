"""Mutation targets of the server's data road: ingest, the store's event ids and dedup, analytics definitions (issue 25)."""

from __future__ import annotations

from .target import Equivalent, Target

TARGETS: dict[str, Target] = {
    "batch": Target(
        "ingest/batch.py",
        ("add", "is_due", "seconds_left", "dedup_token"),
        (
            "tests/foundation/test_ingest_partitions.py::test_two_spool_segments_with_the_same_offsets_are_both_stored",
            "tests/foundation/test_batch_replay.py",
            "tests/foundation/test_batch_parts.py",
        ),
    ),
    "processor": Target(
        "ingest/processor.py",
        (
            "derived_event_id",
            "_sent_without_event_id",
            "process",
            "validate",
            "_with_event_id",
            "_invalid",
        ),
        ("tests/foundation/test_processor.py", "tests/foundation/test_ingest_boundaries.py"),
    ),
}

EQUIVALENT: Equivalent = {
    (
        "ingest/batch.py",
        "add",
        "core/NumberReplacer",
        "self.spans[slot] = (first, last) if known is None else (min(known[0], first), max(known[ 0], last))",
    ): "max(known[0], last) for max(known[1], last): a partition's chunks are added in order (add's precondition), so both are the new chunk's last offset",
    (
        "ingest/batch.py",
        "add",
        "core/ReplaceComparisonOperator_Is_Eq",
        "index for index, message in encoded.invalid if message.reason == InvalidReason.PROJECT_NOT_BOUND_TO_TOPIC",
    ): "an enum member equals only itself: == and is agree on InvalidReason",
}
