"""Batches from different partitions that hold the same offsets are different batches.

Each insert carries a deduplication token named after the partitions and offsets the batch
read, so that a replayed batch is stored once. Two partitions each start at offset 0: if the
token forgot the partition, the second partition's first batch would look like a replay of
the first's and be dropped in silence. Checked on both roads, against the real store (and
the real broker for Kafka), by counting what is stored.
"""

from __future__ import annotations

import pytest
from factories import payload
from kafka_drain import consume_to_end
from kafka_helpers import produce

from retrylens.config import Settings
from retrylens.ingest.consumer import IngestConsumer
from retrylens.ingest.spool_ingestor import SpoolIngestor
from retrylens.sdk.transport.spool import Spool
from retrylens.store import EventStore

pytestmark = pytest.mark.clickhouse


@pytest.mark.parametrize("batch_max_rows", [1, 1_000])
def test_two_spool_segments_with_the_same_offsets_are_both_stored(
    settings: Settings, store: EventStore, batch_max_rows: int
) -> None:
    settings = settings.model_copy(update={"batch_max_rows": batch_max_rows})
    spool = Spool(settings.effective_spool_dir / "agent", segment_bytes=1)  # one record each
    spool.append([(b"task-1", payload(task_id="task-1"))], sync=True)
    spool.append([(b"task-2", payload(task_id="task-2"))], sync=True)
    spool.close()
    segments = {r.position.segment for r in Spool(spool.directory, writer=False).read()}
    offsets = {r.position.offset for r in Spool(spool.directory, writer=False).read()}
    assert len(segments) == 2 and offsets == {0}, "the test needs two partitions at offset 0"
    assert SpoolIngestor(settings, store).drain() == 2
    assert store.count_rows() == 2 and store.count_distinct_events() == 2


@pytest.mark.kafka
def test_two_kafka_partitions_with_the_same_offsets_are_both_stored(
    kafka_settings: Settings, store: EventStore
) -> None:
    settings = kafka_settings.model_copy(update={"batch_max_rows": 1})
    produce(settings, [(b"task-1", payload(task_id="task-1"))], partition=0)
    produce(settings, [(b"task-2", payload(task_id="task-2"))], partition=1)
    consume_to_end(settings, IngestConsumer(settings, store))
    assert store.count_rows() == 2 and store.count_distinct_events() == 2
