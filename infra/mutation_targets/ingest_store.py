"""Mutation targets of the smaller ingest, store and transport modules that coverage.py listed
as "target still to be written" (issue 38 round two, session 16): the tenant binding, the
invalid-burst breaker, the file dead-letter sink, ingest status, private folders, the wire
serializer, the Native block and the migrator; and (session 17) the server's redaction of an
event's free text and embedded mode's spool source; and (session 18) the hand-off package and
its channels.

Each lists the narrowest tests that pin its guarantee; pure tests first, so that ``-x`` stops
most mutants there.
"""

from __future__ import annotations

from .target import Equivalent, Target

_PARTS = "tests/foundation/test_batch_parts.py"

TARGETS: dict[str, Target] = {
    "binding": Target(
        "ingest/binding.py",
        ("projects_for", "parse_project_topics", "refusal"),
        ("tests/foundation/test_binding.py",),
    ),
    "breaker": Target(
        "ingest/breaker.py",
        ("record_valid", "record", "check"),
        (
            "tests/foundation/test_breaker_exact.py",  # pure: every verdict against the definition
            f"{_PARTS}::test_recording_a_clean_run_in_bulk_equals_recording_it_one_by_one",
            f"{_PARTS}::test_the_burst_policy_stops_the_flush_before_any_letter_is_sent",
            f"{_PARTS}::test_tenant_refusals_are_dead_lettered_without_tripping_the_burst_policy",
        ),
    ),
    "dead_letter_file": Target(
        "ingest/dead_letter_file.py",
        ("publish", "flush"),
        (
            "tests/foundation/test_dead_letter_file_exact.py",  # pure: the letters byte for byte
            f"{_PARTS}::test_the_chain_writes_dead_letters_then_inserts_then_commits",
            f"{_PARTS}::test_a_crash_before_commit_replays_the_batch_with_the_same_token",
        ),
    ),
    "ingest_status": Target(
        "ingest/status.py",
        ("record", "snapshot", "combine_snapshots"),
        (
            "tests/foundation/test_ingest_status_exact.py",  # pure: every figure at its boundary
            f"{_PARTS}::test_status_says_whether_ingest_keeps_up",
            f"{_PARTS}::test_a_group_keeps_up_only_if_every_member_does_and_its_figures_add_up",
        ),
    ),
    "private_dirs": Target(
        "sdk/transport/private_dirs.py",
        ("private_dir",),
        ("tests/foundation/test_private_dirs.py",),
    ),
    "serializer": Target(
        "sdk/transport/serializer.py",
        ("_part", "event_bytes"),
        ("tests/sdk/test_sdk_serializer.py",),
    ),
    "native_block": Target(
        "store/native_block.py",
        ("encode_native",),
        (
            "tests/foundation/test_dead_letter_file_exact.py::test_a_row_missing_a_column_is_refused_not_shifted_into_the_others",
            f"{_PARTS}::test_blocks_encoded_apart_insert_as_one_deduplicated_insert",
            f"{_PARTS}::test_a_chunk_keeps_invalid_verdicts_in_place_and_encodes_the_valid_rows",
        ),
    ),
    "ingest_redaction": Target(
        "ingest/redaction.py",
        # Which of an event's free texts are cleaned before storage, and the same object back
        # when none was (the HTTP road re-encodes only a changed event). Pure, under a second.
        ("_replace", "redact_event_text"),
        ("tests/foundation/test_ingest_redaction_exact.py",),
    ),
    "spool_ingestor": Target(
        "ingest/spool_ingestor.py",
        # Embedded mode's spool source: one chunk per segment, a batch a folder, the cursor
        # committed at each folder's furthest position, fallback folders left. chDB.
        ("spool_chunks", "_folders", "run_once", "_commit", "drain", "_any_pending"),
        ("tests/foundation/test_spool_ingestor_exact.py",),
    ),
    "handoff": Target(
        "sdk/transport/handoff.py",
        # What a person receives when a task is handed off: every text cleaned within its limit
        # unless the channel is raw, and every delivery failure a HandoffError. Pure tests and
        # a local HTTP receiver first (a second), then the governor's hand-off road.
        ("_clean", "_clean_json", "to_dict", "redacted", "send", "__init__"),
        (
            "tests/sdk/test_handoff_exact.py",
            "tests/sdk/test_redaction_world.py::test_the_worlds_personal_data_and_secrets_never_reach_the_hand_off_file",
            "tests/sdk/test_redaction_world.py::test_a_non_latin_name_in_a_packages_outputs_and_errors_never_reaches_the_file",
            "tests/sdk/test_redaction_world.py::test_the_raw_package_still_holds_the_name_so_the_test_above_proves_something",
            "tests/sdk/test_sdk_io.py::test_webhook_channel_posts_a_redacted_package",
            "tests/sdk/test_sdk_io.py::test_file_channel_appends_one_json_line_per_handoff",
            "tests/sdk/test_sdk_io.py::test_a_failing_channel_still_stops_the_task_and_says_so",
        ),
    ),
    "migrator": Target(
        "store/migrator.py",
        # Each migration applied once, in order, and recorded; rollback undoes them newest first.
        # chDB: a store start per mutant.
        ("discover", "applied_versions", "pending", "apply", "rollback"),
        ("tests/foundation/test_migrator_exact.py",  # planted migrations: each one seen applied and undone
         "tests/foundation/test_store.py::test_migrations_are_recorded_and_idempotent",
         "tests/foundation/test_store.py::test_rollback_then_forward_again",
         "tests/foundation/test_migrations_frozen.py"),
    ),
}

_SAME_LENGTH = ("the cleaned list is built from the messages one for one: zip of two lists of one length"
                " stops at the same place strict or not")

_BINDING = "ingest/binding.py"
_ANNOTATION = "an annotation, never evaluated (from __future__ import annotations)"

_INGESTOR = "ingest/spool_ingestor.py"
_ASCENDING = "a spool reads its records in order, segments ascending: a later record's segment is never smaller"

_STATUS = "ingest/status.py"
_ONE_COMMIT = "with one commit the first is the last: its lag minus its own lag is 0, the value for none"
_NO_BATCH = ("a member with no batch in its window has mean_batch_rows 0, so its product is 0 whatever its"
             " batch count is taken as")
_TENTHS = ("each member's eps is already rounded to one decimal: their sum is a multiple of 0.1 up to float"
           " noise far below 0.005, so rounding it to two decimals gives the same number as to one")

_SERIALIZER = "sdk/transport/serializer.py"
_HANDOFF = "sdk/transport/handoff.py"

EQUIVALENT: Equivalent = {
    ("store/migrator.py", "applied_versions", "core/NumberReplacer", "return {int(row[ -1]) for row in rows}"):
        "the query selects one column: row[-1] is row[0]",
    (_HANDOFF, "__init__", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def __init__(self, path: str & Path, *, raw: bool = False) -> None:"): _ANNOTATION,
    (_HANDOFF, "__init__", "core/ReplaceBinaryOperator_BitOr_BitAnd", "headers: dict[str, str] & None = None,"):
        _ANNOTATION,
    (_HANDOFF, "_clean", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def _clean(text: str, limit: int & None = None) -> str:"): _ANNOTATION,
    (_SERIALIZER, "_part", "core/ReplaceComparisonOperator_LtE_Lt",
     "if len(written) < _FRAGMENT_MAX_BYTES:  # a large snapshot is not kept (nor its bytes)"):
        "whether a part of exactly 4,096 written bytes is kept changes no byte written (a kept fragment is those"
        " bytes) and keeps the bound (no kept part over 4 KiB); only the edge's side, which nothing promises",
    (_SERIALIZER, "_part", "core/ReplaceComparisonOperator_GtE_Eq", "if len(_FRAGMENTS) == _FRAGMENTS_SIZE:"):
        "the kept parts grow one at a time and are cleared on reaching the size, so the count never passes it",
    (_SERIALIZER, "_part", "core/ReplaceComparisonOperator_Is_Eq", "if known is not None and known[0] == value:"):
        "the entry keeps its part alive, so an id found is that same part's: `==` on an object and itself holds"
        " exactly when `is` does",
    **{(_STATUS, "snapshot", op, "lag_trend = commits[-1].lag - commits[0].lag if len(commits) " + cond + " else 0"):
       _ONE_COMMIT for op, cond in (("core/NumberReplacer", "> 0"), ("core/ReplaceComparisonOperator_Gt_GtE", ">= 1"))},
    **{(_STATUS, "combine_snapshots", "core/NumberReplacer",
        'rows_in_window = sum(float(s["mean_batch_rows"] or 0) * int(s["batches_in_window"] or ' + n + ") for s in snapshots)"):
       _NO_BATCH for n in ("1", "-1")},
    (_STATUS, "combine_snapshots", "core/NumberReplacer",
     '"eps": round(sum(float(s["eps"] or 0) for s in snapshots), 2),'): _TENTHS,
    (_STATUS, "record", "core/ReplaceBinaryOperator_Mul_Div",
     "def record(self, /, messages: int, rows: int, lag: int, insert_s: float) -> None:"):
        "every caller (the consumer after a commit, the tests) passes every figure by name: the same calls",
    (_STATUS, "snapshot", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def snapshot(self) -> dict[str, float & int | bool | None]:"): _ANNOTATION,
    (_STATUS, "snapshot", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def snapshot(self) -> dict[str, float | int | bool & None]:"): _ANNOTATION,
    (_STATUS, "snapshot", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def snapshot(self) -> dict[str, float | int & bool | None]:"): _ANNOTATION,
    **{(_STATUS, "combine_snapshots", "core/ReplaceBinaryOperator_BitOr_BitAnd",
        f"def combine_snapshots(snapshots: list[dict[str, {t}]]) -> dict:"): _ANNOTATION
       for t in ("float & int | bool | None", "float | int & bool | None", "float | int | bool & None")},
    ("ingest/breaker.py", "record", "core/ReplaceComparisonOperator_Eq_GtE",
     "if len(self._recent) >= self.window and self._invalid_in_window / self.window > self.max_ratio:"):
        "the verdicts are a deque with maxlen=window: its length never passes the window, so >= is ==",
    ("ingest/breaker.py", "record", "core/ReplaceComparisonOperator_Eq_GtE",
     "if len(self._recent) >= self.window and not self._recent[0]:"):
        "the verdicts are a deque with maxlen=window: its length never passes the window, so >= is ==",
    ("ingest/breaker.py", "record", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def record(self, valid: bool) -> str & None:"): _ANNOTATION,
    (_INGESTOR, "spool_chunks", "core/NumberReplacer", "run[ -1].position.segment,"):
        "a run is cut where the segment changes: its first and last records share one segment",
    (_INGESTOR, "spool_chunks", "core/ReplaceComparisonOperator_Eq_GtE",
     "if end == len(records) or records[end].position.segment != records[start].position.segment:".replace(
         "end ==", "end >=")): "end runs up to len(records) and no further: >= is ==",
    (_INGESTOR, "spool_chunks", "core/ReplaceComparisonOperator_NotEq_Gt",
     "if end == len(records) or records[end].position.segment > records[start].position.segment:"): _ASCENDING,
    (_INGESTOR, "_commit", "core/ReplaceComparisonOperator_Gt_GtE",
     "if topic not in ends or position >= ends[topic]:"): "replacing a position with an equal one changes nothing",
    (_INGESTOR, "_commit", "core/ReplaceComparisonOperator_Gt_NotEq",
     "if topic not in ends or position != ends[topic]:"):
        "a batch's positions are keyed in the order its chunks were read (segments ascending), so the last"
        " position of a topic is its furthest: keeping the last is keeping the largest",
    ("ingest/dead_letter_file.py", "publish", "core/ReplaceBinaryOperator_Mul_Div",
     "def publish(self, invalid: InvalidMessage, /, key: bytes | None, value: bytes | None) -> None:"):
        "the chain (its one caller) passes the message by position and key and value by name: the same call",
    ("ingest/dead_letter_file.py", "publish", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def publish(self, invalid: InvalidMessage, *, key: bytes & None, value: bytes | None) -> None:"): _ANNOTATION,
    ("ingest/dead_letter_file.py", "publish", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def publish(self, invalid: InvalidMessage, *, key: bytes | None, value: bytes & None) -> None:"): _ANNOTATION,
    (_BINDING, "refusal", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def refusal(project: str, topic: str, allowed: frozenset[str]) -> str & None:"): _ANNOTATION,
    (_BINDING, "parse_project_topics", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     ") -> ProjectBinding & None:"): _ANNOTATION,
    (_BINDING, "parse_project_topics", "core/ReplaceBinaryOperator_Mul_Div",
     "project_topics: Mapping[str, Sequence[str]], /, event_topic: str, dlq_topic: str"):
        "every caller (settings, consumer, dead-letter replay, client setup) passes the binding by position"
        " and both topics by name: the same calls",
    (_BINDING, "parse_project_topics", "core/ReplaceComparisonOperator_NotEq_IsNot",
     "if not isinstance(project, str) or not project.strip() or project is not project.strip():"):
        "CPython's str.strip returns the string itself when there is nothing to strip and a new one"
        " otherwise, so `is not` holds exactly when `!=` does (the names are str, checked just before)",
    ("ingest/redaction.py", "redact_event_text", "core/ReplaceTrueWithFalse",
     "if any(c != m.content for c, m in zip(cleaned_messages, messages, strict=False)):"): _SAME_LENGTH,
    ("ingest/redaction.py", "redact_event_text", "core/ReplaceTrueWithFalse",
     "for c, m in zip(cleaned_messages, messages, strict=False)"): _SAME_LENGTH,
    ("sdk/transport/private_dirs.py", "private_dir", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def private_dir(path: Path & str) -> Path:"): "an annotation, never evaluated (from __future__ import annotations)",
    ("sdk/transport/private_dirs.py", "private_dir", "core/ReplaceBreakWithContinue", "continue"):
        "every parent of an existing folder exists too, so going on past the first one adds nothing to the missing list",
}
