"""Rows as event objects: the consumer's line format, and the ``SELECT`` that makes them rows.

The decode step writes each valid event as the JSON object msgspec encodes from the
validated struct (every field present, nested parts as objects, ``ts`` normalised to UTC
milliseconds, a derived ``event_id`` filled in), prefixed with its Kafka position
(``_t``, ``_p``, ``_o``): one ``JSONEachRow`` line, about 3 µs of Python where building
the 50-column row cost three times that. ClickHouse reads the lines in C++ on the insert
thread and this ``SELECT`` derives the row exactly as :func:`~.event_table.event_row`
does: the flat columns are extracted from the nested parts, and the JSON-text columns
(``input_features``, ``context_snapshot``, ``side_effects``) store the parts' text as
the encoder wrote it (``input_format_json_read_objects_as_strings``), which is the text
the Native road writes with orjson. ``tests/foundation/test_ingest_json_rows.py`` holds
every column of every stored row equal between the two roads.
"""

from __future__ import annotations

import re

import msgspec
import orjson
from pydantic import BaseModel

from retrylens.schemas import RetryEvent
from retrylens.schemas.wire import WireEvent

from .event_table import JSON_INSERT_COLUMN_NAMES

#: The columns of one event line (names are the JSON keys), in the encoder's order. The
#: integer types are the stored ones: validation has already bounded every value to them.
LINE_STRUCTURE = ", ".join(
    (
        "_t String", "_p Int32", "_o Int64",
        "schema_version UInt8", "event_id UUID", "ts DateTime64(3, 'UTC')",
        "project String", "agent String", "task_id String", "correlation_id String",
        "parent_task_id Nullable(String)", "trace_id Nullable(String)", "span_id Nullable(String)",
        "parent_span_id Nullable(String)", "attempt UInt16", "phase String", "kind String",
        "dependency String", "error_type Nullable(String)", "retryable Nullable(Bool)",
        "error_detail Nullable(String)", "input_fingerprint Nullable(String)", "input_features String",
        "context_snapshot Nullable(String)", "side_effects String", "decision String",
        "decision_reason String", "backoff_ms UInt32", "policy_id String", "policy_version String",
        "shadow Bool", "shadow_decision Nullable(String)", "propensity Nullable(Float64)",
        "degraded Bool", "outcome Nullable(String)", "tokens_in UInt32", "tokens_out UInt32",
        "cost_usd Float64", "latency_ms UInt32",
    )
)

#: :data:`LINE_STRUCTURE` as an SQL string literal (for ``input(...)`` and ``file(...)``).
LINE_STRUCTURE_SQL = "'" + LINE_STRUCTURE.replace("\\", "\\\\").replace("'", "\\'") + "'"

# The parts are extracted only for the row's flat columns, so each type names only the fields
# a column reads (named tuples are matched by key; the others are skipped, not built): the
# context snapshot's messages and digests, most of an event's bytes, are stored as the part's
# text and were built into arrays of strings on every insert only to be dropped.
_ERROR = "Tuple(message String, code String, status Nullable(UInt16), stack_digest Nullable(String))"
_CONTEXT = (
    "Tuple(message_count UInt32, token_count UInt32, pollution_score Float64, "
    "trailing_errors UInt32, recent_error_share Float64, repeated_tool_calls UInt32)"
)
_EFFECTS = "Array(Tuple(idempotency_key String))"
_AGENT = "Tuple(name String, role String)"
#: The row's values, in :data:`~.event_table.JSON_INSERT_COLUMN_NAMES` order.
_VALUES: dict[str, str] = {
    "event_id": "event_id",
    "schema_version": "schema_version",
    "ts": "ts",
    "project": "project",
    "agent_name": "_agent.name",
    "agent_role": "_agent.role",
    "task_id": "task_id",
    "correlation_id": "correlation_id",
    "parent_task_id": "ifNull(parent_task_id, '')",
    "trace_id": "ifNull(trace_id, '')",
    "span_id": "ifNull(span_id, '')",
    "parent_span_id": "ifNull(parent_span_id, '')",
    "attempt": "attempt",
    "phase": "phase",
    "kind": "kind",
    "dependency": "dependency",
    "error_type": "ifNull(error_type, '')",
    "retryable": "retryable",
    "error_message": "_error.message",
    "error_code": "_error.code",
    "error_status": "ifNull(_error.status, 0)",
    "stack_digest": "ifNull(_error.stack_digest, '')",
    "input_fingerprint": "ifNull(input_fingerprint, '')",
    "input_features": "if(input_features = '{}', '', input_features)",
    "context_message_count": "_context.message_count",
    "context_token_count": "_context.token_count",
    "pollution_score": "toFloat32(_context.pollution_score)",
    "trailing_errors": "_context.trailing_errors",
    "recent_error_share": "toFloat32(_context.recent_error_share)",
    "repeated_tool_calls": "_context.repeated_tool_calls",
    "context_snapshot": "ifNull(context_snapshot, '')",
    "side_effects": "if(side_effects = '[]', '', side_effects)",
    "side_effect_keys": "arrayMap(e -> e.1, _effects)",
    "decision": "decision",
    "decision_reason": "decision_reason",
    "backoff_ms": "backoff_ms",
    "policy_id": "policy_id",
    "policy_version": "policy_version",
    "shadow": "shadow",
    "shadow_decision": "ifNull(shadow_decision, '')",
    "propensity": "CAST(propensity, 'Nullable(Float32)')",
    "degraded": "degraded",
    "outcome": "ifNull(outcome, '')",
    "tokens_in": "tokens_in",
    "tokens_out": "tokens_out",
    "cost_usd": "cost_usd",
    "latency_ms": "latency_ms",
    "kafka_topic": "_t",
    "kafka_partition": "_p",
    "kafka_offset": "_o",
}
assert tuple(_VALUES) == JSON_INSERT_COLUMN_NAMES, "the SELECT must fill every inserted column"


def lines_select(source: str) -> str:
    """``SELECT`` of the rows (:data:`~.event_table.JSON_INSERT_COLUMN_NAMES` order) of the
    event lines in ``source``: ``input(...)`` on a server, ``file(...)`` in chDB."""
    values = ",\n    ".join(_VALUES.values())
    sql = (
        f"SELECT\n    {values}\nFROM (\n  SELECT *,\n"
        f"    JSONExtract(agent, '{_AGENT}') AS _agent,\n"
        f"    JSONExtract(ifNull(error_detail, '{{}}'), '{_ERROR}') AS _error,\n"
        f"    JSONExtract(ifNull(context_snapshot, '{{}}'), '{_CONTEXT}') AS _context,\n"
        f"    JSONExtract(side_effects, '{_EFFECTS}') AS _effects\n"
        f"  FROM {source}\n"
        ")"
    )
    # Named-tuple fields by name, spelled the way every ClickHouse version reads them.
    return _FIELD.sub(lambda m: f"tupleElement({m[1]}, '{m[2]}')", sql)


_FIELD = re.compile(r"\b(_agent|_error|_context)\.(\w+)")


_ENCODER = msgspec.json.Encoder()


def line_prefix(topic: str, partition: int) -> bytes:
    """The start of every line of one partition's chunk, up to its offset."""
    return b'{"_t":' + _ENCODER.encode(topic) + b',"_p":%d,"_o":' % partition


def append_event_line(block: bytearray, event: RetryEvent | WireEvent, prefix: bytes, offset: int) -> None:
    """Append one validated event's line and its newline to ``block`` (a chunk's lines).

    The line is written in place: msgspec encodes the event straight into the block, whose
    opening ``{`` then becomes the comma after the position, so no line is built, sliced
    or joined on its own (this runs once per event on the consumer's thread).

    The parts stored as JSON text must read as the Native road writes them (orjson).
    msgspec writes every string, integer, boolean and null as orjson does, and every float
    too except those with a positive exponent (``1e+18`` in orjson, ``1e18`` in msgspec).
    The context snapshot's floats are bounded to [0, 1] and side effects have none, so
    msgspec's own encoding is orjson's; the input features may hold any float, so they are
    written by orjson and spliced in as raw JSON.
    """
    if isinstance(event, BaseModel):  # lax input the fast decoder left to pydantic: rare
        block += b"%s%d,%s\n" % (prefix, offset, orjson.dumps(event.model_dump(mode="json"))[1:])
        return
    block += prefix
    block += b"%d" % offset
    start = len(block)
    features = event.input_features
    if not features:
        _ENCODER.encode_into(event, block, -1)
    else:
        try:
            event.input_features = msgspec.Raw(orjson.dumps(features))  # type: ignore[assignment]
            _ENCODER.encode_into(event, block, -1)
        finally:
            event.input_features = features
    block[start] = _COMMA  # the body's "{": the line goes on after the position
    block += b"\n"


_COMMA = ord(",")
