"""Prometheus metrics of the ingest pipeline (one registry per process)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

MESSAGES = Counter("retrylens_ingest_messages_total", "Messages read, by verdict", ["verdict"])
ROWS_INSERTED = Counter("retrylens_ingest_rows_inserted_total", "Rows inserted into ClickHouse")
BATCHES = Counter("retrylens_ingest_batches_total", "Batches inserted and committed")
DEAD_LETTERS = Counter("retrylens_ingest_dead_letters_total", "Messages sent to the DLQ", ["reason"])
INSERT_SECONDS = Histogram(
    "retrylens_ingest_insert_seconds",
    "Duration of one batch insert",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
BATCH_ROWS = Histogram(
    "retrylens_ingest_batch_rows",
    "Rows of one inserted batch",
    buckets=(10, 100, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000),
)
BATCH_BYTES = Histogram(
    "retrylens_ingest_batch_bytes",
    "Payload bytes of one inserted batch",
    buckets=(1e4, 1e5, 1e6, 4e6, 1.6e7, 6.4e7),
)
LAG = Gauge("retrylens_ingest_lag_messages", "High watermark minus committed offset", ["partition"])
BREAKER_TRIPS = Counter("retrylens_ingest_breaker_trips_total", "Invalid-burst breaker trips")
INSERT_FALLBACKS = Counter(
    "retrylens_ingest_insert_fallbacks_total", "Batches ClickHouse rejected as JSON rows, inserted as Native rows"
)
