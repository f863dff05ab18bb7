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
        (
            # Pure: the verdict is the stored row or the dead letter. The spool road's "stored
            # once" (test_ingest_boundaries.py) follows from the equal ids pinned here; a
            # chDB start would cost each mutant 25-50 s more on the shared machine.
            "tests/foundation/test_processor.py::test_valid_payload_becomes_a_row_that_keeps_its_source",
            "tests/foundation/test_processor.py::test_processing_twice_gives_the_same_row",
            "tests/foundation/test_processor.py::test_malformed_payloads_get_their_reason",
            "tests/foundation/test_processor.py::test_missing_fields_are_listed",
            "tests/foundation/test_processor.py::test_schema_version_is_required_on_the_wire",
            "tests/foundation/test_processor.py::test_a_cost_the_rollups_cannot_hold_is_a_dead_letter_not_a_poison_pill",
            "tests/foundation/test_ingest_boundaries.py::test_an_event_without_id_gets_the_same_id_each_time_it_is_processed",
            "tests/foundation/test_ingest_boundaries.py::test_an_event_id_in_a_nested_object_only_is_not_the_events_id",
            "tests/foundation/test_ingest_boundaries.py::test_a_sent_event_id_is_kept",
            "tests/foundation/test_processor_guarantees.py",
        ),
    ),
    "definitions": Target(
        "analytics/definitions.py",
        ("key", "count", "measure_mask_sql", "_ratio", "metrics_from"),
        (
            "tests/analytics/test_analytics_definitions.py",
            "tests/analytics/test_definitions_guarantees.py",
            "tests/analytics/test_analytics_metrics.py::test_summary_matches_hand_computed_values_despite_duplicates",
            "tests/analytics/test_analytics_sealing.py::test_partly_sealed_metrics_match_hand_computed_values",
            "tests/analytics/test_analytics_sealing.py::test_task_spanning_sealed_and_open_buckets_counts_once",
            "tests/analytics/test_analytics_sealing.py::test_late_event_spreading_a_sealed_task_over_two_buckets_counts_it_once",
            "tests/analytics/test_analytics_task_search.py",
        ),
    ),
    "chain": Target(
        "ingest/chain.py",
        (
            # What hands batches on and commits them; seconds_left, inserting and
            # build_chain's defaults are the chain_timing target (session 9).
            "submit",
            "_done",
            "_finish",
            "poll",
            "join",
            "_hand_on",
            "close",
        ),
        (
            "tests/foundation/test_chain_guarantees.py",
            "tests/foundation/test_batch_parts.py::test_the_chain_writes_dead_letters_then_inserts_then_commits",
            "tests/foundation/test_batch_parts.py::test_a_failed_dead_letter_flush_inserts_and_commits_nothing",
            "tests/foundation/test_batch_parts.py::test_a_crash_before_commit_replays_the_batch_with_the_same_token",
            "tests/foundation/test_batch_parts.py::test_the_burst_policy_stops_the_flush_before_any_letter_is_sent",
            "tests/foundation/test_batch_parts.py::test_a_batch_is_handed_on_when_full_and_when_old",
        ),
    ),
    "writer": Target(
        "ingest/writer.py",
        # The fallback and its count; insert_event_lines (the event-line insert and its
        # settings) is the insert_lines target.
        ("_sql_value", "native_rows", "write"),
        (
            "tests/foundation/test_writer_guarantees.py",
            "tests/foundation/test_ingest_json_rows.py::test_a_batch_clickhouse_rejects_goes_in_as_native_rows_once",
            "tests/foundation/test_ingest_json_rows.py::test_a_replayed_batch_of_json_rows_is_not_stored_twice",
        ),
    ),
    "insert_lines": Target(
        "ingest/writer.py",
        ("insert_event_lines",),
        (
            "tests/foundation/test_store_dedup_guarantees.py::test_an_event_resent_within_one_insert_is_counted_once_on_both_roads",
            "tests/foundation/test_writer_guarantees.py::test_a_line_clickhouse_would_fill_with_defaults_goes_in_from_its_raw_message",
            "tests/foundation/test_batch_parts.py::test_json_row_blocks_encoded_apart_insert_as_one_deduplicated_insert",
            "tests/foundation/test_ingest_json_rows.py::test_a_batch_clickhouse_rejects_goes_in_as_native_rows_once",
            "tests/foundation/test_ingest_json_rows.py::test_a_replayed_batch_of_json_rows_is_not_stored_twice",
            "tests/foundation/test_ingest_json_rows.py::test_floats_are_stored_identically_at_rounding_edges",
        ),
    ),
    "event_row": Target(
        "store/event_table.py",
        ("_values",),
        (
            # Pure first (every optional part present and absent, column by column); then
            # the two roads' stored rows compared (one chDB start) for what the pure misses.
            "tests/foundation/test_event_row_guarantees.py",
            "tests/foundation/test_ingest_json_rows.py::test_fleet_and_failure_events_are_stored_identically",
            "tests/foundation/test_ingest_json_rows.py::test_every_fields_boundary_values_are_stored_identically",
        ),
    ),
    "event_lines": Target(
        "store/event_lines.py",
        ("lines_select", "line_prefix", "append_event_line"),
        (
            "tests/foundation/test_event_line_guarantees.py",
            # The SELECT that turns lines into rows runs only in ClickHouse: one line insert.
            "tests/foundation/test_store_dedup_guarantees.py::test_an_event_resent_within_one_insert_is_counted_once_on_both_roads",
        ),
    ),
    "chain_timing": Target(
        "ingest/chain.py",
        # What session 8's narrowed chain target left out: when the source's loop comes
        # back (seconds_left, inserting) and the defaults of build_chain.
        ("seconds_left", "inserting", "build_chain"),
        (
            "tests/foundation/test_chain_guarantees.py::test_a_full_batch_is_stored_then_committed_at_once_by_default",
            "tests/foundation/test_chain_guarantees.py::test_a_finished_helper_insert_is_committed_by_poll_without_more_input",
        ),
    ),
    "store_dedup": Target(
        "store/events.py",
        ("insert_rows", "insert_native", "count_distinct_events"),
        (
            "tests/foundation/test_store_dedup_guarantees.py",
            "tests/foundation/test_store.py::test_same_dedup_token_inserts_once",
            "tests/foundation/test_store.py::test_resent_event_in_another_batch_is_counted_once",
            "tests/foundation/test_batch_parts.py::test_blocks_encoded_apart_insert_as_one_deduplicated_insert",
        ),
    ),
    "encoder": Target(
        "ingest/encoder.py",
        ("encode_chunk", "bound"),
        (
            "tests/foundation/test_ingest_json_rows.py::test_invalid_messages_are_judged_the_same_as_by_the_processor",
            "tests/foundation/test_batch_parts.py::test_a_chunk_keeps_invalid_verdicts_in_place_and_encodes_the_valid_rows",
            "tests/foundation/test_batch_parts.py::test_tenant_refusals_are_dead_lettered_without_tripping_the_burst_policy",
            "tests/foundation/test_writer_guarantees.py::test_a_rejected_batch_with_tenant_refusals_goes_in_as_its_bound_rows_once",
        ),
    ),
}

#: Why an annotation mutant (``|`` → ``&``) is equivalent in these modules.
_ANNOTATION = "an annotation: the module has `from __future__ import annotations`, so it is a string never evaluated"
_ONE_LITERAL = (
    "a literal_error comes only from schema_version (the only Literal field of RetryEvent and of the wire struct;"
    ' pydantic reports every wrong value there as literal_error, tried: 2, "1", null, [1], {}), so the loc test and'
    " the type test each imply the other"
)

_POSITIONAL = "the keyword-only `*` as `/`: every caller passes the rows or blocks by position and the token by keyword"
#: Not equivalent in general: untestable here (no ClickHouse cluster in the test environment).
_CLUSTER_ONLY = (
    "read only by a cluster's Distributed events table; on a single server (chDB, every test) ClickHouse"
    " ignores insert_distributed_sync, so no test here can observe it (the cluster DDL is tested as text only)"
)

#: The event-line insert's "one block" settings (ingest/writer.py insert_event_lines) hold it
#: one all-or-nothing block twice over: the reader makes one chunk (no parallel parsing,
#: max_block_size above the batch's rows) and the squash before the table holds every chunk
#: to the end (min_insert_block_size_rows above the batch's rows, no byte threshold).
_ONE_BLOCK = (
    "one of the settings that keep the event-line insert one block, each redundant with the others: the"
    " reader makes one chunk (parallel parsing off, max_block_size above the batch's rows), and the squash"
    " before the table holds every chunk to the end (min_insert_block_size_rows above the rows, byte"
    " threshold off). Measured in chDB 26.9 on 20,000 events (15 MB, past the 10 MiB parallel-parsing"
    " segment): with this setting changed alone the insert is one part and a bad last line stores nothing;"
    " only two changed together (parallel parsing on and a 1-byte minimum) make two parts. max_threads"
    " changes nothing with parallel parsing off, and the events table's views keep the write one stream"
)
_ONE_BLOCK_SIZE = (
    "one_block only has to exceed, or equal, the batch's rows: every caller passes rows as the number of"
    " lines (the writer's row_count, the tests' chunk.rows) and a batch reaching the insert has at least one"
    " (an empty body returns first), so max(rows, 0), max(rows, 2) and + 0, + 2 all size one block for"
    " every row and leave the squash holding everything until the last line (rows >= rows)"
)
_WRITER_CLUSTER_ONLY = (
    "read only by a cluster's Distributed events table (the event-line insert's insert_distributed_sync, as"
    " in store/events.py insert_native); chDB and a single server ignore it, and the test environment has no"
    " cluster (the cluster DDL is tested as text only)"
)
_LINES_SIGNATURE = "def insert_event_lines(store: EventStore, blocks: Sequence[bytes], {}, rows: int, dedup_token: str {} None) -> None:"

EQUIVALENT: Equivalent = {
    (
        "store/event_table.py",
        "_values",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def _values(event: RetryEvent & WireEvent, *, topic: str, partition: int, offset: int) -> list[Any]:",
    ): _ANNOTATION,
    (
        "store/event_table.py",
        "_values",
        "core/ReplaceBinaryOperator_Mul_Div",
        "def _values(event: RetryEvent | WireEvent, /, topic: str, partition: int, offset: int) -> list[Any]:",
    ): "the keyword-only `*` as `/`: the one caller (event_row) passes the event by position and the"
    " topic, partition and offset by keyword",
    (
        "store/event_lines.py",
        "append_event_line",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def append_event_line(block: bytearray, event: RetryEvent & WireEvent, prefix: bytes, offset: int) -> None:",
    ): _ANNOTATION,
    (
        "ingest/chain.py",
        "seconds_left",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def seconds_left(self) -> float & None:",
    ): _ANNOTATION,
    (
        "ingest/chain.py",
        "build_chain",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "policy: BurstPolicy & None = None,",
    ): _ANNOTATION,
    (
        "ingest/chain.py",
        "build_chain",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "before_commit: Callable[[Batch], None] & None = None,",
    ): _ANNOTATION,
    (
        "ingest/writer.py",
        "insert_event_lines",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        _LINES_SIGNATURE.format("*", "&"),
    ): _ANNOTATION,
    (
        "ingest/writer.py",
        "insert_event_lines",
        "core/ReplaceBinaryOperator_Mul_Div",
        _LINES_SIGNATURE.format("/", "|"),
    ): "the keyword-only `*` as `/`: every caller (the writer, bench/ingest.py, the tests) passes the"
    " store and blocks by position and rows and the token by keyword",
    **{
        ("ingest/writer.py", "insert_event_lines", "core/NumberReplacer", line): _ONE_BLOCK_SIZE
        for line in (
            "one_block = max(rows, 0) + 1",
            "one_block = max(rows, 2) + 1",
            "one_block = max(rows, 1) + 0",
            "one_block = max(rows, 1) + 2",
        )
    },
    **{
        ("ingest/writer.py", "insert_event_lines", "core/NumberReplacer", line): _ONE_BLOCK
        for line in (
            '"input_format_parallel_parsing": 1,',
            '"max_threads": 0,',
            '"max_threads": 2,',
            '"min_insert_block_size_bytes": 1,',
        )
    },
    **{
        (
            "ingest/writer.py",
            "insert_event_lines",
            "core/NumberReplacer",
            line,
        ): _WRITER_CLUSTER_ONLY
        for line in (
            'settings["insert_distributed_sync"] = 0',
            'settings["insert_distributed_sync"] = 2',
        )
    },
    (
        "ingest/writer.py",
        "insert_event_lines",
        "core/AddNot",
        "if not store.ctx.cluster:",
    ): _WRITER_CLUSTER_ONLY,
    (
        "ingest/encoder.py",
        "encode_chunk",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "projects: frozenset[str] & None = None,",
    ): _ANNOTATION,
    (
        "ingest/encoder.py",
        "encode_chunk",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "values: Sequence[bytes & None],",
    ): _ANNOTATION,
    (
        "ingest/encoder.py",
        "encode_chunk",
        "core/ReplaceTrueWithFalse",
        "for index, (offset, value) in enumerate(zip(offsets, values, strict=False)):",
    ): "its callers (encode_raw, the encode pool's workers) pass one RawChunk's offsets and values, built together"
    " one of each per message, so the lists are always as long",
    (
        "ingest/writer.py",
        "native_rows",
        "core/ReplaceTrueWithFalse",
        "for offset, value in zip(chunk.offsets, chunk.values, strict=False):",
    ): "every source builds a RawChunk's offsets and values together, one of each per message, so the two lists"
    " are always as long and zip's strict check never fires",
    (
        "store/events.py",
        "insert_rows",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def insert_rows(self, rows: Sequence[Sequence[Any]], *, dedup_token: str & None = None) -> None:",
    ): _ANNOTATION,
    (
        "store/events.py",
        "insert_native",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def insert_native(self, blocks: Sequence[bytes], *, dedup_token: str & None = None) -> None:",
    ): _ANNOTATION,
    (
        "store/events.py",
        "count_distinct_events",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def count_distinct_events(self, project: str & None = None) -> int:",
    ): _ANNOTATION,
    (
        "store/events.py",
        "insert_rows",
        "core/ReplaceBinaryOperator_Mul_Div",
        "def insert_rows(self, rows: Sequence[Sequence[Any]], /, dedup_token: str | None = None) -> None:",
    ): _POSITIONAL,
    (
        "store/events.py",
        "insert_native",
        "core/ReplaceBinaryOperator_Mul_Div",
        "def insert_native(self, blocks: Sequence[bytes], /, dedup_token: str | None = None) -> None:",
    ): _POSITIONAL,
    (
        "store/events.py",
        "insert_native",
        "core/NumberReplacer",
        'settings["insert_distributed_sync"] = 2',
    ): _CLUSTER_ONLY,
    (
        "store/events.py",
        "insert_native",
        "core/NumberReplacer",
        'settings["insert_distributed_sync"] = 0',
    ): _CLUSTER_ONLY,
    ("store/events.py", "insert_native", "core/AddNot", "if not self.ctx.cluster:"): _CLUSTER_ONLY,
    (
        "ingest/chain.py",
        "poll",
        "core/ReplaceFalseWithTrue",
        "self._collect(wait=True)",
    ): "DecodeInPool.poll waiting for every chunk on the workers takes back the same results in the same order,"
    " only sooner or later: what is stored and committed is the same (the loop's latency, which no result shows)",
    (
        "analytics/definitions.py",
        "_ratio",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def _ratio(numerator: float, denominator: float) -> float & None:",
    ): _ANNOTATION,
    (
        "analytics/definitions.py",
        "key",
        "core/ReplaceComparisonOperator_Eq_LtE",
        'return ATTEMPT_KEY if self.unit <= "attempt" else TASK_KEY',
    ): 'a unit is "attempt" or "task" (the Unit literal, every Count is written in this module): "attempt" <= "attempt"'
    ' and "task" > "attempt", so <= and == agree',
    (
        "analytics/definitions.py",
        "key",
        "core/ReplaceComparisonOperator_Eq_Is",
        'return ATTEMPT_KEY if self.unit is "attempt" else TASK_KEY',
    ): "every Count's unit is a literal written in this module, and CPython interns identifier-like string"
    " constants: the unit and 'attempt' are one object exactly when they are equal",
    (
        "analytics/definitions.py",
        "measure_mask_sql",
        "core/ReplaceComparisonOperator_Eq_Is",
        'bits = [f"if({c.condition}, {1 << MEASURE_BITS[c.name]}, 0)" for c in COUNTS if c.unit is unit]',
    ): "both sides are interned literals: every Count's unit is written in this module and the one caller"
    " (seal_sql) passes the literals 'attempt' and 'task'",
    (
        "ingest/processor.py",
        "validate",
        "core/ReplaceComparisonOperator_Is_Eq",
        "sent_without_id = event.event_id == msgspec.UNSET",
    ): "msgspec.UNSET equals only itself (identity equality), so == and is agree",
    (
        "ingest/processor.py",
        "_invalid",
        "core/NumberReplacer",
        "first = errors[ -1]",
    ): "the two verdicts read from the first error (json_invalid, a top-level model_type) are always reported alone,"
    " so the first and the last error are the same error whenever either test can hold",
    (
        "ingest/processor.py",
        "_invalid",
        "core/ReplaceComparisonOperator_Eq_IsNot",
        'if error["loc"] == ("schema_version",) and error["type"] is not "literal_error":',
    ): _ONE_LITERAL,
    (
        "ingest/processor.py",
        "_invalid",
        "core/ReplaceComparisonOperator_Eq_LtE",
        'if error["loc"] <= ("schema_version",) and error["type"] == "literal_error":',
    ): _ONE_LITERAL,
    (
        "ingest/processor.py",
        "_invalid",
        "core/ReplaceFalseWithTrue",
        "errors = exc.errors(include_url=False, include_input=True)",
    ): "the dead letter's detail reads only each error's loc, msg and type, never its input or url",
    (
        "ingest/processor.py",
        "validate",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def validate(payload: bytes | None, source: SourceRef) -> RetryEvent | WireEvent & InvalidMessage:",
    ): _ANNOTATION,
    (
        "ingest/processor.py",
        "_invalid",
        "core/ReplaceComparisonOperator_Eq_IsNot",
        'if error["loc"] is not ("schema_version",) and error["type"] == "literal_error":',
    ): _ONE_LITERAL,
    (
        "ingest/processor.py",
        "_with_event_id",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def _with_event_id(event: RetryEvent | WireEvent, event_id: uuid.UUID) -> RetryEvent & WireEvent:",
    ): _ANNOTATION,
    (
        "ingest/processor.py",
        "_invalid",
        "core/ReplaceComparisonOperator_Eq_LtE",
        'if error["loc"] == ("schema_version",) and error["type"] <= "literal_error":',
    ): _ONE_LITERAL,
    (
        "ingest/processor.py",
        "_invalid",
        "core/ReplaceComparisonOperator_Eq_GtE",
        'if error["loc"] >= ("schema_version",) and error["type"] == "literal_error":',
    ): _ONE_LITERAL,
    (
        "ingest/processor.py",
        "_with_event_id",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def _with_event_id(event: RetryEvent & WireEvent, event_id: uuid.UUID) -> RetryEvent | WireEvent:",
    ): _ANNOTATION,
    (
        "ingest/processor.py",
        "process",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def process(payload: bytes | None, source: SourceRef) -> ValidEvent & InvalidMessage:",
    ): _ANNOTATION,
    (
        "ingest/processor.py",
        "_invalid",
        "core/ReplaceComparisonOperator_Eq_GtE",
        'if error["loc"] == ("schema_version",) and error["type"] >= "literal_error":',
    ): _ONE_LITERAL,
    (
        "ingest/processor.py",
        "_sent_without_event_id",
        "core/ReplaceComparisonOperator_Is_Eq",
        "return _TOP_LEVEL_ID.decode(payload).event_id == msgspec.UNSET",
    ): "msgspec.UNSET equals only itself (identity equality), so == and is agree",
    (
        "ingest/processor.py",
        "validate",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def validate(payload: bytes & None, source: SourceRef) -> RetryEvent | WireEvent | InvalidMessage:",
    ): _ANNOTATION,
    (
        "ingest/processor.py",
        "_invalid",
        "core/ReplaceFalseWithTrue",
        "errors = exc.errors(include_url=True, include_input=False)",
    ): "the dead letter's detail reads only each error's loc, msg and type, never its input or url",
    (
        "ingest/processor.py",
        "_invalid",
        "core/ReplaceAndWithOr",
        'if error["loc"] == ("schema_version",) or error["type"] == "literal_error":',
    ): _ONE_LITERAL,
    (
        "ingest/processor.py",
        "process",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def process(payload: bytes & None, source: SourceRef) -> ValidEvent | InvalidMessage:",
    ): _ANNOTATION,
    (
        "ingest/processor.py",
        "validate",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def validate(payload: bytes | None, source: SourceRef) -> RetryEvent & WireEvent | InvalidMessage:",
    ): _ANNOTATION,
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
