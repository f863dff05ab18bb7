"""Ingest throughput: end-to-end vs consume-only vs a naive per-event insert loop, one run.

    python bench/ingest.py [--events N] [--naive-events M] [--payload both|fleet|failures] [--json]

Needs a Kafka broker (KAFKA_BOOTSTRAP_SERVERS, default 127.0.0.1:9092: start one with
``bash infra/kafka/kafka.sh start``); ClickHouse is an embedded chDB in a temp folder.

For each payload mix (the simulated fleet's events, and failure events with error detail
and a context snapshot), each consumer side reads its own topic, pre-filled with the same
N events by a producer process (its rate is reported as ``produce_eps``):

* ``e2e_eps``: the real ``IngestConsumer`` as configured by default — poll, validate,
  write event lines, insert into ClickHouse on the insert thread, commit — from the call
  (its topic check, Kafka clients and group join included) until the last offset is
  committed (the process's set-up before the call, as ``retrylens consume`` does it, is not:
  the store opened, the start-up heap settled by :mod:`retrylens.ingest.heap`);
  ``e2e_workers_eps`` is the same with ``--workers`` ingest worker processes (default 1)
  doing the validation.
* ``e2e_unvalidated_eps`` (an experiment, not a product road): the same consumer with the
  decode step replaced by splicing each raw payload after its Kafka position — no
  validation, no re-encoding, nothing dead-lettered. What is left is Kafka, the chain and
  ClickHouse's insert: the ceiling of any validation, however fast
  (``unvalidated_ratio`` = that / consume-only).
* ``consume_only_eps``: the same Kafka client settings, but the consumer only counts
  messages — the ceiling the pipeline can reach. ``ratio`` = e2e / consume-only.
* ``naive_eps``: validate and insert one event at a time (what a first version does).
* ``cpu_us_per_event``: each stage alone on the same payloads (see :func:`stage_cpu_us`).

Targets (issues 2 and 14): e2e ≥ 0.6 × consume-only (stretch 0.8) and ≥ 20 × naive. The
machine may be shared: ``load_average_1m`` (before, after) says how busy it was.
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
from retrylens.ingest.encoder import encode_chunk  # noqa: E402
from retrylens.ingest.heap import settle_startup_heap  # noqa: E402
from retrylens.ingest.kafka_clients import ensure_topics, make_consumer, make_producer  # noqa: E402
from retrylens.ingest.processor import SourceRef, ValidEvent, process, validate  # noqa: E402
from retrylens.ingest.writer import insert_event_lines  # noqa: E402
from retrylens.schemas import RetryEvent  # noqa: E402
from retrylens.store import open_store  # noqa: E402
from retrylens.store.event_lines import append_event_line, line_prefix  # noqa: E402
from retrylens.store.event_table import event_row  # noqa: E402
from retrylens.store.native_block import encode_native  # noqa: E402

#: what this bench's ``--smoke`` run needs beside the code (tests/bench/test_bench_smoke.py)
SMOKE_NEEDS = ("kafka",)
#: the fleet whose events make the payloads, and the events each stage is timed on (``--smoke`` shrinks both)
FLEET_TASKS = 2_000
STAGE_EVENTS = 5_000


def payloads(n: int, kind: str = "fleet") -> list[tuple[bytes, bytes]]:
    """``n`` (key, value) pairs: the simulated fleet's event mix, or only failures."""
    return fleet_payloads(n) if kind == "fleet" else failure_payloads(n)


def fleet_payloads(n: int) -> list[tuple[bytes, bytes]]:
    """The default scenario's events (seed 7), tiled with fresh ids to ``n``: the real mix
    of kinds and sizes (started/succeeded/failed attempts, decisions, side effects, …)."""
    from retrylens.simulation.fleet import run_fleet
    from retrylens.simulation.scenario import load_scenario

    events: list[RetryEvent] = []
    run_fleet(load_scenario(), tasks=FLEET_TASKS, seed=7, emit=events.append)
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


def _produce(bootstrap: str, topics: list[str], n: int, kind: str) -> None:
    """Fill each topic with the same ``n`` events (generated once; the rate is the first topic's)."""
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap  # read from the environment (see main)
    settings = load_settings()
    producer = make_producer(settings)
    records = payloads(n, kind)
    for topic in topics:
        for key, value in records:
            producer.send(topic, key=key, value=value)
        producer.flush(timeout=300)
    producer.close()


def _prefilled_topics(settings: Settings, n: int, labels: list[str], kind: str) -> tuple[list[Settings], float]:
    """Fresh topics holding ``n`` events each; returns settings for them and the produce rate
    (events per second over all topics, the fleet's generation included)."""
    prefilled = [
        settings.model_copy(
            update={
                "kafka_topic": f"bench-{label}-{uuid.uuid4().hex[:6]}",
                "kafka_group": f"bench-{label}-{uuid.uuid4().hex[:6]}",
            }
        )
        for label in labels
    ]
    for each in prefilled:
        ensure_topics(each)
    started = time.perf_counter()
    producer = mp.get_context("spawn").Process(
        target=_produce, args=(settings.kafka_bootstrap_servers, [p.kafka_topic for p in prefilled], n, kind)
    )
    producer.start()
    producer.join()
    if producer.exitcode != 0:
        raise SystemExit("the benchmark producer failed")
    return prefilled, n * len(labels) / (time.perf_counter() - started)


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


def stage_cpu_us(settings: Settings, kind: str, n: int | None = None) -> dict[str, float]:
    """CPU µs per event of each stage, measured alone on the same payloads (best of 3).

    Today's consumer: ``validate_us`` + ``line_us`` (the event line) on the consumer's
    thread (with the GIL), ``insert_us`` (ClickHouse parsing the lines, deriving the rows
    and storing them, in C++ without the GIL) on the insert thread. ``native_row_us`` +
    ``native_encode_us`` are what the Native road spends instead of ``line_us``.
    """
    n = n or STAGE_EVENTS
    values = [value for _, value in payloads(n, kind)]
    sources = [SourceRef("stage", 0, offset) for offset in range(n)]

    def best(fn) -> float:
        times = []
        for _ in range(3):
            started = time.process_time()
            fn()
            times.append(time.process_time() - started)
        return min(times) / n * 1e6

    events = [validate(value, source) for value, source in zip(values, sources, strict=True)]
    rows = [process(value, source).row for value, source in zip(values, sources, strict=True)]
    chunk = encode_chunk("stage", 0, list(range(n)), values)
    store = open_store(settings.model_copy(update={"clickhouse_database": f"bench_stages_{kind}"}))
    tokens = iter(range(10**6))
    prefix = line_prefix("t", 0)
    return {
        "validate_us": round(best(lambda: [validate(v, s) for v, s in zip(values, sources, strict=True)]), 2),
        "line_us": round(best(lambda: _lines_in_place(events, prefix)), 2),
        "insert_us": round(
            best(
                lambda: insert_event_lines(store, [chunk.block], rows=chunk.rows, dedup_token=f"stage-{next(tokens)}")
            ),
            2,
        ),
        "native_row_us": round(best(lambda: [event_row(e, topic="t", partition=0, offset=1) for e in events]), 2),
        "native_encode_us": round(best(lambda: encode_native(rows)), 2),
        "pydantic_validate_us": round(best(lambda: [RetryEvent.model_validate_json(v) for v in values]), 2),
    }


def _lines_in_place(events: list, prefix: bytes) -> bytes:
    """The event lines of ``events`` as the decode step writes them: into one buffer."""
    block = bytearray()
    for event in events:
        append_event_line(block, event, prefix, 1)
    return bytes(block)


def end_to_end(settings: Settings, n: int, workers: int, *, threaded_insert: bool = True) -> tuple[float, float]:
    """Poll, validate, batch, insert into ClickHouse and commit every message.

    Returns the rate and this process's CPU µs per event (all its threads, chDB's
    included; not the workers'): on a shared machine the CPU figure is the steadier one.
    """
    settings = settings.model_copy(update={"ingest_workers": workers})
    store = open_store(settings)
    settle_startup_heap()  # as `retrylens consume` does once its store is open
    started, cpu_started = time.perf_counter(), time.process_time()
    IngestConsumer(settings, store, threaded_insert=threaded_insert).run(max_messages=n)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    assert store.count_distinct_events() == n, "benchmark lost or duplicated events"
    return n / elapsed, cpu / n * 1e6


def end_to_end_unvalidated(settings: Settings, n: int) -> float:
    """:func:`end_to_end` with the decode step swapped for splicing the raw payloads (the
    benchmark's payloads are valid, so every event is still stored: the count is checked)."""
    from retrylens.ingest import encoder

    def splice(topic, partition, offsets, values, projects=None):  # encode_chunk's signature
        prefix = line_prefix(topic, partition)
        lines = [b"%s%d,%s" % (prefix, offset, value[1:]) for offset, value in zip(offsets, values, strict=True)]
        return encoder.EncodedChunk(len(lines), b"\n".join(lines) + b"\n", [])

    real = encoder.encode_chunk
    encoder.encode_chunk = splice
    try:
        return end_to_end(settings, n, workers=0)[0]
    finally:
        encoder.encode_chunk = real


def naive(settings: Settings, n: int, kind: str) -> float:
    store = open_store(settings.model_copy(update={"clickhouse_database": "bench_naive"}))
    records = payloads(n, kind)
    started = time.perf_counter()
    for offset, (_, value) in enumerate(records):
        outcome = process(value, SourceRef("naive", 0, offset))
        assert isinstance(outcome, ValidEvent)
        store.insert_rows([outcome.row])
    return n / (time.perf_counter() - started)


def run_payload(settings: Settings, kind: str, events: int, naive_events: int, workers: int) -> dict[str, object]:
    """Every figure for one payload mix, the consumer sides run one after the other."""
    settings = settings.model_copy(update={"clickhouse_database": f"bench_{kind}"})
    (consume_topic, e2e_topic, workers_topic, unvalidated_topic), produce_eps = _prefilled_topics(
        settings, events, ["co", "e2e", "wrk", "unv"], kind
    )
    consume_rate, fetch_cpu_us = consume_only(consume_topic, events)
    e2e = end_to_end(e2e_topic, events, workers=0)
    unvalidated = end_to_end_unvalidated(
        unvalidated_topic.model_copy(update={"clickhouse_database": f"bench_{kind}_unvalidated"}), events
    )
    with_workers = end_to_end(
        workers_topic.model_copy(update={"clickhouse_database": f"bench_{kind}_workers"}), events, workers
    )
    stages = {"fetch_us": round(fetch_cpu_us, 2), **stage_cpu_us(settings, kind)}
    consumer_thread = stages["fetch_us"] + stages["validate_us"] + stages["line_us"]
    results: dict[str, object] = {
        "payload": kind,
        "produce_eps": round(produce_eps),
        "consume_only_eps": round(consume_rate),
        "e2e_eps": round(e2e[0]),
        "e2e_workers_eps": round(with_workers[0]),
        "e2e_unvalidated_eps": round(unvalidated),
        "naive_eps": round(naive(settings, naive_events, kind)),
        "e2e_consumer_cpu_us": {"inline": round(e2e[1], 1), "workers": round(with_workers[1], 1)},
        "cpu_us_per_event": stages,
        # The consumer's thread holds the GIL for fetch + validate + row; the insert runs
        # beside it on the second core. Idle-machine ceiling of the inline ratio:
        "bound_e2e_vs_consume_only": round(stages["fetch_us"] / max(consumer_thread, stages["insert_us"]), 3),
    }
    results["ratio"] = round(e2e[0] / consume_rate, 3)
    results["workers_ratio"] = round(with_workers[0] / consume_rate, 3)
    results["unvalidated_ratio"] = round(unvalidated / consume_rate, 3)
    results["e2e_vs_naive"] = round(e2e[0] / results["naive_eps"], 1)  # type: ignore[operator]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--naive-events", type=int, default=2_000)
    parser.add_argument(
        "--payload",
        choices=["fleet", "failures", "both"],
        default="both",
        help="event mix: the simulated fleet's, only failure events (the costly kind), or both (default)",
    )
    parser.add_argument("--workers", type=int, default=1, help="ingest workers of the e2e_workers consumer")
    parser.add_argument(
        "--batch-rows",
        type=int,
        default=10_000,
        help="rows per insert (batch_max_rows; default 10,000, the setting every figure of this "
        "bench was measured with): each insert costs the store a fixed ~50-65 ms of CPU with the "
        "materialized views, whatever its size (bench/RESULTS.md, session 19)",
    )
    parser.add_argument(
        "--without-redaction",
        action="store_true",
        help="an experiment, not a product road: skip the server's redaction of event text "
        "(ingest/redaction.py), to read its cost beside a run with it",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny size (needs the broker of KAFKA_BOOTSTRAP_SERVERS)")
    args = parser.parse_args()
    if args.smoke:
        global FLEET_TASKS, STAGE_EVENTS
        args.events, args.naive_events, args.payload = 100, 5, "fleet"
        FLEET_TASKS, STAGE_EVENTS = 20, 100
    if args.without_redaction:
        from retrylens.ingest import processor

        processor.redact_event_text = lambda event: event  # type: ignore[assignment]
    if args.events < 1 or args.naive_events < 1 or args.workers < 1 or args.batch_rows < 1:
        parser.error("--events, --naive-events, --workers and --batch-rows must be positive")
    data_dir = Path(tempfile.mkdtemp(prefix="retrylens-bench-"))
    # the brokers through the environment, as the product reads them (an init argument named
    # by the field is refused by pydantic-settings 2.4, the declared floor, for an aliased field)
    os.environ.setdefault("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    settings = load_settings(
        data_dir=data_dir,
        clickhouse_database="bench",
        batch_max_rows=args.batch_rows,
        batch_max_seconds=1.0,
    )
    kinds = ["fleet", "failures"] if args.payload == "both" else [args.payload]
    load_before = os.getloadavg()[0]
    results: dict[str, object] = {
        "events": args.events,
        "workers": args.workers,
        "batch_rows": args.batch_rows,
        "redaction": not args.without_redaction,
    }
    for kind in kinds:
        results[kind] = run_payload(settings, kind, args.events, args.naive_events, args.workers)
        print(json.dumps({kind: results[kind]}), file=sys.stderr, flush=True)  # survives a later failure
    results["load_average_1m"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:>16}: {value}")


if __name__ == "__main__":
    main()
