"""How a :class:`RetryEvent` becomes one row of the ``events`` table.

The column list is the single source for the insert's column names and the row builder, so
they cannot disagree, and the live schema (:mod:`.schema`) states the table from it; the DDL
is the migrations' own (0001, 0010), and a test holds the migrated table equal to this list.
Nested parts that analytics rarely filter on (context snapshot, side effects, input
features) are kept as JSON strings; the fields that metrics slice by are flat columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
import orjson
from pydantic import BaseModel

from retrylens.schemas import RetryEvent
from retrylens.schemas.wire import WireEvent


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    bulky: bool = False  # gets the shorter column TTL


EVENT_COLUMNS: tuple[Column, ...] = (
    Column("event_id", "UUID"),
    Column("schema_version", "UInt8"),
    Column("ts", "DateTime64(3, 'UTC')"),
    Column("project", "LowCardinality(String)"),
    Column("agent_name", "LowCardinality(String)"),
    Column("agent_role", "LowCardinality(String)"),
    Column("task_id", "String"),
    Column("correlation_id", "String"),
    Column("parent_task_id", "String"),
    Column("trace_id", "String"),
    Column("span_id", "String"),
    Column("parent_span_id", "String"),
    Column("attempt", "UInt16"),
    Column("phase", "LowCardinality(String)"),
    Column("kind", "LowCardinality(String)"),
    Column("dependency", "LowCardinality(String)"),
    Column("error_type", "LowCardinality(String)"),
    Column("retryable", "Nullable(Bool)"),
    Column("error_message", "String", bulky=True),
    Column("error_code", "LowCardinality(String)"),
    Column("error_status", "UInt16"),
    Column("stack_digest", "String"),
    Column("input_fingerprint", "String"),
    Column("input_features", "String"),
    Column("context_message_count", "UInt32"),
    Column("context_token_count", "UInt32"),
    Column("pollution_score", "Float32"),
    Column("trailing_errors", "UInt32"),  # from migration 0010
    Column("recent_error_share", "Float32"),
    Column("repeated_tool_calls", "UInt32"),
    Column("context_snapshot", "String", bulky=True),
    Column("side_effects", "String"),
    Column("side_effect_keys", "Array(String)"),
    Column("decision", "LowCardinality(String)"),
    Column("decision_reason", "String"),
    Column("backoff_ms", "UInt32"),
    Column("policy_id", "LowCardinality(String)"),
    Column("policy_version", "LowCardinality(String)"),
    Column("shadow", "Bool"),
    Column("shadow_decision", "LowCardinality(String)"),
    Column("propensity", "Nullable(Float32)"),
    Column("degraded", "Bool"),
    Column("outcome", "LowCardinality(String)"),
    Column("tokens_in", "UInt32"),
    Column("tokens_out", "UInt32"),
    Column("cost_usd", "Float64"),
    Column("latency_ms", "UInt32"),
    Column("kafka_topic", "LowCardinality(String)"),
    Column("kafka_partition", "Int32"),
    Column("kafka_offset", "Int64"),
    Column("ingested_at", "DateTime64(3, 'UTC')"),
)

EVENT_COLUMN_NAMES: tuple[str, ...] = tuple(column.name for column in EVENT_COLUMNS)
#: Types the insert encodes: LowCardinality columns travel as plain strings, because
#: building their dictionaries in Python costs more than ClickHouse converting them.
INSERT_TYPE_NAMES: tuple[str, ...] = tuple(
    column.type.replace("LowCardinality(String)", "String") for column in EVENT_COLUMNS
)
#: Columns of an event-line insert (:mod:`.event_lines`): all but ``ingested_at``, which the table's
#: ``DEFAULT now64(3)`` fills at insert time (one clock read per batch, in ClickHouse).
JSON_INSERT_COLUMN_NAMES: tuple[str, ...] = tuple(name for name in EVENT_COLUMN_NAMES if name != "ingested_at")
_UINT32_MAX = 2**32 - 1


def _json(value: Any) -> str:
    return orjson.dumps(value).decode() if value else ""


def _part_json(part: Any) -> str:
    """One JSON text for a nested part, whichever decoder produced it (same bytes for both)."""
    if isinstance(part, list):
        return orjson.dumps([_plain(item) for item in part]).decode()
    return orjson.dumps(_plain(part)).decode()


def _plain(part: Any) -> Any:
    return (
        part.model_dump(mode="json") if isinstance(part, BaseModel) else msgspec.to_builtins(part)
    )


def event_row(
    event: RetryEvent | WireEvent, *, topic: str, partition: int, offset: int
) -> list[Any]:
    """The row for ``event`` read from ``topic[partition]@offset``, in column order.

    ``event`` is the pydantic model or the consumer's fast :data:`WireEvent`; both have
    the same attributes, and the row must not depend on which one was used.
    """
    row = _values(event, topic=topic, partition=partition, offset=offset)
    row.append(datetime.now(UTC))
    return row


def _values(event: RetryEvent | WireEvent, *, topic: str, partition: int, offset: int) -> list[Any]:
    error = event.error_detail
    context = event.context_snapshot
    return [
        event.event_id,
        event.schema_version,
        event.ts,
        event.project,
        event.agent.name,
        event.agent.role,
        event.task_id,
        event.correlation_id,
        event.parent_task_id or "",
        event.trace_id or "",
        event.span_id or "",
        event.parent_span_id or "",
        event.attempt,
        event.phase,
        event.kind.value,
        event.dependency,
        event.error_type.value if event.error_type else "",
        event.retryable,
        error.message if error else "",
        error.code if error else "",
        (error.status or 0) if error else 0,
        (error.stack_digest or "") if error else "",
        event.input_fingerprint or "",
        _json(event.input_features),
        context.message_count if context else 0,
        min(context.token_count, _UINT32_MAX) if context else 0,
        context.pollution_score if context else 0.0,
        min(context.trailing_errors, _UINT32_MAX) if context else 0,
        context.recent_error_share if context else 0.0,
        min(context.repeated_tool_calls, _UINT32_MAX) if context else 0,
        _part_json(context) if context else "",
        _part_json(event.side_effects) if event.side_effects else "",
        [effect.idempotency_key for effect in event.side_effects],
        event.decision.value,
        event.decision_reason,
        min(event.backoff_ms, _UINT32_MAX),
        event.policy_id,
        event.policy_version,
        event.shadow,
        event.shadow_decision.value if event.shadow_decision else "",
        event.propensity,
        event.degraded,
        event.outcome.value if event.outcome else "",
        min(event.tokens_in, _UINT32_MAX),
        min(event.tokens_out, _UINT32_MAX),
        event.cost_usd,
        min(event.latency_ms, _UINT32_MAX),
        topic,
        partition,
        offset,
    ]
