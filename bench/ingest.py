"""Ingest throughput: end-to-end vs consume-only vs a naive per-event insert loop, one run.

    python bench/ingest.py [--events N] [--naive-events M] [--json]

Needs a Kafka broker (KAFKA_BOOTSTRAP_SERVERS, default 127.0.0.1:9092: start one with
``bash infra/kafka/kafka.sh start``); ClickHouse is an embedded chDB in a temp folder.

Each consumer side reads its own topic, pre-filled with the same N events by a producer
process (the agent fleet; its rate is reported as ``produce_eps``):

* ``e2e_eps``: the real ``IngestConsumer`` — poll, validate, batch, insert into
  ClickHouse, commit — from the first poll until the last offset is committed, with
  ``--workers`` ingest workers (default 1: validation and encoding on a second process,
  Kafka and ClickHouse on the consumer's); ``e2e_inline_eps`` is the same with none.
  ``e2e_inline_sync_insert_eps`` is inline with the insert on the consumer's own thread
  (the chain before the insert step got its helper thread), for a side-by-side baseline.
* ``consume_only_eps``: the same Kafka client settings, but the consumer only counts
  messages — the ceiling the pipeline can reach.
* ``naive_eps``: validate and insert one event at a time (what a first version does).

Targets (issue 2): e2e ≥ 0.6 × consume-only and ≥ 20 × naive.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from retrylens.config import Settings, load_settings  # noqa: E402
from retrylens.ingest.consumer import IngestConsumer  # noqa: E402
from retrylens.ingest.kafka_clients import ensure_topics, make_consumer, make_producer  # noqa: E402
from retrylens.ingest.processor import SourceRef, ValidEvent, process  # noqa: E402
from retrylens.schemas import RetryEvent  # noqa: E402
from retrylens.store import open_store  # noqa: E402
from retrylens.store.event_table import event_row  # noqa: E402
from retrylens.store.native_block import encode_native  # noqa: E402


def payloads(n: int, kind: str = "fleet") -> list[tuple[bytes, bytes]]:
    """``n`` (key, value) pairs: the simulated fleet's event mix, or only failures."""
    return fleet_payloads(n) if kind == "fleet" else failure_payloads(n)


def fleet_payloads(n: int) -> list[tuple[bytes, bytes]]:
    """The default scenario's events (seed 7), tiled with fresh ids to ``n``: the real mix
    of kinds and sizes (started/succeeded/failed attempts, decisions, side effects, …)."""
    from retrylens.simulation.fleet import run_fleet
    from retrylens.simulation.scenario import load_scenario

    events: list[RetryEvent] = []
    run_fleet(load_scenario(), tasks=2_000, seed=7, emit=events.append)
    bodies = [orjson.loads(event.to_json_bytes()) for event in events]
    out = []
    for i in range(n):
        body = dict(bodies[i % len(bodies)])
        tile = i // len(bodies)
        body.update(
            event_id=str(uuid.uuid4()),
            task_id=f"{body['task_id']}~{tile}",
            correlation_id=f"{body['correlation_id']}~{tile}",
        )
        out.append((body["task_id"].encode(), orjson.dumps(body)))
    return out


def failure_payloads(n: int) -> list[tuple[bytes, bytes]]:
    """``n`` failure events with error detail and a context snapshot (the costly kind)."""
    template = orjson.loads(
        RetryEvent(
            project="bench",
            agent={"name": "researcher", "role": "executor"},
            task_id="t",
            correlation_id="c",
            kind="attempt_failed",
            phase="execution",
            dependency="gpt-4o",
            error_type="timeout",
            retryable=True,
            error_detail={"message": "upstream timed out after 30000 ms", "code": "ETIMEDOUT", "status": 504},
            input_fingerprint="ab" * 16,
            input_features={"n_chars": 812, "n_words": 140, "language": "en", "kw:refund": True},
            context_snapshot={"message_count": 7, "token_count": 2100, "pollution_score": 0.2},
            tokens_in=2100,
            tokens_out=120,
            cost_usd=0.0123,
            latency_ms=30_000,
        ).to_json_bytes()
    )
    out = []
    for i in range(n):
        task = f"task-{i % 5000}"
        template.update(event_id=str(uuid.uuid4()), task_id=task, correlation_id=f"{task}/{i % 4}", attempt=i % 4)
        out.append((task.encode(), orjson.dumps(template)))
    return out


def _produce(bootstrap: str, topic: str, n: int, kind: str) -> None:
    settings = load_settings(kafka_bootstrap_servers=bootstrap)
    producer = make_producer(settings)
    for key, value in payloads(n, kind):
        producer.send(topic, key=key, value=value)
    producer.flush(timeout=300)
    producer.close()


def _start_producer(settings: Settings, topic: str, n: int, kind: str) -> mp.Process:
    process_ = mp.get_context("spawn").Process(
        target=_produce, args=(settings.kafka_bootstrap_servers, topic, n, kind)
    )
    process_.start()
    return process_


def _prefilled_topic(settings: Settings, n: int, label: str, kind: str) -> tuple[Settings, float]:
    """A fresh topic holding ``n`` events; returns settings for it and the produce rate."""
    settings = settings.model_copy(
        update={
            "kafka_topic": f"bench-{label}-{uuid.uuid4().hex[:6]}",
            "kafka_group": f"bench-{label}-{uuid.uuid4().hex[:6]}",
        }
    )
    ensure_topics(settings)
    started = time.perf_counter()
    producer = _start_producer(settings, settings.kafka_topic, n, kind)
    producer.join()
    if producer.exitcode != 0:
        raise SystemExit("the benchmark producer failed")
    return settings, n / (time.perf_counter() - started)


def consume_only(settings: Settings, n: int) -> tuple[float, float]:
    """Poll every message with the ingest consumer's client settings; nothing else.

    Returns the rate and the Kafka client's CPU time per message (µs).
    """
    consumer = make_consumer(settings, group_id=settings.kafka_group)
    consumer.subscribe([settings.kafka_topic])
    started, cpu_started = time.perf_counter(), time.process_time()
    seen = 0
    while seen < n:
        for messages in consumer.poll(timeout_ms=500).values():
            seen += len(messages)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    consumer.close()
    return n / elapsed, cpu / n * 1e6


def stage_cpu_us(settings: Settings, kind: str, n: int = 10_000) -> dict[str, float]:
    """CPU µs per event of each stage, measured alone on the same payloads (best of 3).

    With ingest workers the consumer's core does fetch + insert and a worker does
    process + encode, so e2e / consume-only cannot exceed
    fetch / max(fetch + insert, process + encode) on an otherwise idle machine.
    """
    values = [value for _, value in payloads(n, kind)]
    sources = [SourceRef("stage", 0, offset) for offset in range(n)]

    def best(fn) -> float:
        times = []
        for _ in range(3):
            started = time.process_time()
            fn()
            times.append(time.process_time() - started)
        return min(times) / n * 1e6

    rows = [process(value, source).row for value, source in zip(values, sources, strict=True)]
    store = open_store(settings.model_copy(update={"clickhouse_database": "bench_stages"}))
    block = encode_native(rows)
    tokens = iter(range(10**6))
    return {
        "process_us": round(best(lambda: [process(v, s) for v, s in zip(values, sources, strict=True)]), 2),
        "pydantic_process_us": round(
            best(
                lambda: [
                    event_row(RetryEvent.model_validate_json(v), topic="t", partition=0, offset=0) for v in values
                ]
            ),
            2,
        ),
        "encode_us": round(best(lambda: encode_native(rows)), 2),
        "insert_us": round(best(lambda: store.insert_native([block], dedup_token=f"stage-{next(tokens)}")), 2),
    }


def end_to_end(settings: Settings, n: int, workers: int, *, threaded_insert: bool = True) -> tuple[float, float]:
    """Poll, validate, batch, insert into ClickHouse and commit every message.

    Returns the rate and this process's CPU µs per event (all its threads, chDB's
    included; not the workers'): on a shared machine the CPU figure is the steadier one.
    """
    settings = settings.model_copy(update={"ingest_workers": workers})
    store = open_store(settings)
    started, cpu_started = time.perf_counter(), time.process_time()
    IngestConsumer(settings, store, threaded_insert=threaded_insert).run(max_messages=n)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    assert store.count_distinct_events() == n, "benchmark lost or duplicated events"
    return n / elapsed, cpu / n * 1e6


def naive(settings: Settings, n: int, kind: str) -> float:
    store = open_store(settings.model_copy(update={"clickhouse_database": "bench_naive"}))
    records = payloads(n, kind)
    started = time.perf_counter()
    for offset, (_, value) in enumerate(records):
        outcome = process(value, SourceRef("naive", 0, offset))
        assert isinstance(outcome, ValidEvent)
        store.insert_rows([outcome.row])
    return n / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--naive-events", type=int, default=2_000)
    parser.add_argument(
        "--payload",
        choices=["fleet", "failures"],
        default="fleet",
        help="event mix: the simulated fleet's (default) or only failure events (the costly kind)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="ingest workers of the e2e consumer (e2e_inline_eps uses 0)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.events < 1 or args.naive_events < 1 or args.workers < 0:
        parser.error("--events and --naive-events must be positive, --workers not negative")
    data_dir = Path(tempfile.mkdtemp(prefix="retrylens-bench-"))
    settings = load_settings(
        data_dir=data_dir,
        kafka_bootstrap_servers=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
        clickhouse_database="bench",
        batch_max_rows=10_000,
        batch_max_seconds=1.0,
    )
    consume_topic, produce_eps = _prefilled_topic(settings, args.events, "co", args.payload)
    e2e_topic, _ = _prefilled_topic(settings, args.events, "e2e", args.payload)
    inline_topic, _ = _prefilled_topic(settings, args.events, "inl", args.payload)
    sync_topic, _ = _prefilled_topic(settings, args.events, "syn", args.payload)
    consume_rate, fetch_cpu_us = consume_only(consume_topic, args.events)
    e2e = end_to_end(e2e_topic, args.events, workers=args.workers)
    inline = end_to_end(inline_topic.model_copy(update={"clickhouse_database": "bench_inline"}), args.events, 0)
    sync = end_to_end(
        sync_topic.model_copy(update={"clickhouse_database": "bench_sync"}), args.events, 0, threaded_insert=False
    )
    results = {
        "events": args.events,
        "payload": args.payload,
        "produce_eps": round(produce_eps),
        "consume_only_eps": round(consume_rate),
        "e2e_eps": round(e2e[0]),
        "e2e_inline_eps": round(inline[0]),
        "e2e_inline_sync_insert_eps": round(sync[0]),
        "e2e_consumer_cpu_us": {"workers": round(e2e[1], 1), "inline": round(inline[1], 1), "inline_sync_insert": round(sync[1], 1)},
        "naive_eps": round(naive(settings, args.naive_events, args.payload)),
    }
    results["workers"] = args.workers
    results["e2e_vs_consume_only"] = round(results["e2e_eps"] / results["consume_only_eps"], 3)
    results["inline_vs_consume_only"] = round(results["e2e_inline_eps"] / results["consume_only_eps"], 3)
    results["e2e_vs_naive"] = round(results["e2e_eps"] / results["naive_eps"], 1)
    stages = {"fetch_us": round(fetch_cpu_us, 2), **stage_cpu_us(settings, args.payload)}
    results["cpu_us_per_event"] = stages
    consumer_core = stages["fetch_us"] + stages["insert_us"]
    worker_core = stages["process_us"] + stages["encode_us"]
    results["bound_e2e_vs_consume_only_1_worker"] = round(stages["fetch_us"] / max(consumer_core, worker_core), 3)
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:>22}: {value}")


if __name__ == "__main__":
    main()
