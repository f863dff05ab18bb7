"""One tenant attacks, another reads: ``/healthz`` and the other tenant's reads under each attack.

    python bench/attacks.py [--tasks N] [--seconds S] [--json] [--smoke]

1. A setup process seeds an embedded store with ``N`` synthetic tasks of the ``victim`` project.
2. ``retrylens serve`` starts on it with two keys: ``victim`` and ``attacker``.
3. A probe process sends ``/healthz`` (``--rate`` a second) and the victim's
   ``GET /v1/projects/victim/metrics`` (a store read, a fifth as often), each on its own
   connection, open loop, for ``S`` seconds, each timed from when it was due (so a stall counts
   for every request it delayed): first with the
   server idle (the baseline, in the same run), then while the attacker, from another process
   on two connections, sends one of these back to back:

   - ``gzip_bomb``: ``/v1/traces`` with a 1 MiB gzip body inflating to 1 GiB;
   - ``otlp_retention``: ``/v1/traces`` protobuf requests of ~620 KB, new traces each, every span
     with 300 attributes the mapping never reads (the server's RSS growth is reported);
   - ``precheck_features``: ``/v1/precheck`` with 80,000 features (~1 MiB);
   - ``deep_nesting``: ``/v1/events`` with a body nested 100,000 levels deep.

Prints, per attack, the p99 of each probe and its ratio to idle (target: ≤ 2), the attack's
answers by status and the server's RSS after it; and the idle probe once more at the end, as a
ratio to the first (the machine's own noise: on a shared machine an attack's ratio within that
distance from 1 says nothing). ``--json``: one object. ``--smoke``: a tiny
size (a suite test runs it) whose figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import _free_port, _percentile, _run_child, _wait_healthy  # noqa: E402

KEYS = {"victim": "victim-key-0123456789", "attacker": "attacker-key-0123456789"}
ATTACKS = ("gzip_bomb", "otlp_retention", "precheck_features", "deep_nesting")
MIB = 1024 * 1024


def setup(data_dir: Path, tasks: int) -> dict:
    """Seed the victim's tasks (its own process: chDB allows one owner at a time)."""
    from retrylens.analytics.synthetic import synthetic_events
    from retrylens.config import load_settings
    from retrylens.store import open_store
    from retrylens.store.event_table import event_row

    store = open_store(load_settings(data_dir=data_dir))
    events = synthetic_events(tasks, seed=42, project="victim")
    store.insert_rows([event_row(e, topic="bench", partition=0, offset=i) for i, e in enumerate(events)])
    return {"events": len(events)}


def probe(url: str, seconds: float, rate: float) -> dict:
    """``/healthz`` at ``rate`` and the victim's metrics read at a fifth of it, each on its own
    connection and thread, open loop, each request timed from when it was due (a request that
    waited behind a stalled one waited for the server too: else a 5 s stall is one slow sample)."""
    import httpx

    health = httpx.Client(base_url=url, timeout=120)
    reads = httpx.Client(base_url=url, timeout=120, headers={"X-API-Key": KEYS["victim"]})
    calls = {"healthz": (lambda: health.get("/healthz"), rate),
             "victim_read": (lambda: reads.get("/v1/projects/victim/metrics"), rate / 5)}
    for call, _rate in calls.values():
        call()
    latencies: dict[str, list[float]] = {name: [] for name in calls}
    errors: list[int] = []
    start = time.perf_counter()

    def run(name: str) -> None:
        call, per_second = calls[name]
        tick = 0
        while (due := start + tick / per_second) < start + seconds:
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            if call().status_code != 200:
                errors.append(1)
            latencies[name].append((time.perf_counter() - due) * 1000)
            tick += 1

    threads = [threading.Thread(target=run, args=(name,)) for name in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"latencies": latencies, "errors": len(errors)}


def _bomb(inflated: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return b"".join(packer.compress(bytes(MIB)) for _ in range(inflated // MIB)) + packer.flush()


def _otlp_request(batch: int, spans: int, attributes: int) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i in range(spans):
        span = scope.spans.add(trace_id=(batch * spans + i + 1).to_bytes(16, "big"), span_id=b"\x01" * 8,
                               name="chat", start_time_unix_nano=1_760_000_000 * 10**9,
                               end_time_unix_nano=1_760_000_001 * 10**9)
        for k in range(attributes):
            span.attributes.add(key=f"junk.{k}").value.string_value = "v"
    return request.SerializeToString()


def attack(url: str, kind: str, seconds: float, smoke: bool) -> dict:
    """Send ``kind`` back to back on two connections for ``seconds``; count the answers."""
    import httpx

    headers = {"X-API-Key": KEYS["attacker"]}
    batches = iter(range(10**9))
    lock = threading.Lock()
    if kind == "gzip_bomb":
        body = _bomb(64 * MIB if smoke else 1000 * MIB)
        request = {"url": "/v1/traces", "content": body,
                   "headers": {**headers, "Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}}
    elif kind == "precheck_features":
        request = {"url": "/v1/precheck", "headers": {**headers, "Content-Type": "application/json"},
                   "content": json.dumps({"project": "attacker", "agent": "a", "task_input": "x",
                                          "features": {str(i): 1 for i in range(80_000)}}).encode()}
    elif kind == "deep_nesting":
        depth = 100_000
        request = {"url": "/v1/events", "headers": {**headers, "Content-Type": "application/json"},
                   "content": b'{"events": ' + b"[" * depth + b"]" * depth + b"}"}
    else:
        request = {}
    statuses: Counter[int] = Counter()
    print("ready", flush=True)  # the body is built (a 1 GiB bomb takes seconds): the probe may start
    stop = time.perf_counter() + seconds

    def run() -> None:
        client = httpx.Client(base_url=url, timeout=300)
        while time.perf_counter() < stop:
            if kind == "otlp_retention":
                with lock:
                    batch = next(batches)
                spans, attributes = (20, 30) if smoke else (200, 300)
                answer = client.post("/v1/traces", content=_otlp_request(batch, spans, attributes),
                                     headers={**headers, "Content-Type": "application/x-protobuf"})
            else:
                answer = client.post(**request)
            with lock:
                statuses[answer.status_code] += 1

    workers = [threading.Thread(target=run) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return {"statuses": {str(k): v for k, v in sorted(statuses.items())}}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _p99s(measured: dict) -> dict:
    return {f"{name}_p99_ms": round(_percentile(values, 0.99), 2) for name, values in measured["latencies"].items()}


def _child(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--child", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _result(process: subprocess.Popen) -> dict:
    out, err = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"bench child failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> dict:
    import os
    import signal

    with tempfile.TemporaryDirectory(prefix="retrylens-attacks-") as folder:
        data_dir = Path(folder)
        base = {k: v for k, v in os.environ.items() if not k.startswith("RETRYLENS_")}
        port = _free_port()
        env = {**base, "RETRYLENS_DATA_DIR": str(data_dir), "RETRYLENS_API_KEYS": json.dumps(KEYS),
               "RETRYLENS_API_PORT": str(port), "RETRYLENS_KAFKA_BOOTSTRAP_SERVERS": ""}
        seeded = _run_child(["--child", "setup", str(data_dir), str(args.tasks)], env) if args.tasks else {"events": 0}
        server = subprocess.Popen([sys.executable, "-m", "retrylens.cli.main", "serve", "--host", "127.0.0.1",
                                   "--port", str(port), "--log-level", "warning"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(url, server)
            seconds, rate = str(args.seconds), str(args.rate)
            idle = _p99s(_result(_child(["probe", url, seconds, rate], env)))
            out: dict = {"tasks": seeded["events"], "seconds": args.seconds, "idle": idle,
                         "idle_rss_mb": _rss_mb(server.pid), "attacks": {}}
            for kind in args.attacks:
                # the attack outlasts the probe by the probe's start-up, so the probe is measured under it
                attacker = _child(["attack", url, kind, str(args.seconds + (0.5 if args.smoke else 5)),
                                   "smoke" if args.smoke else "full"], env)
                assert attacker.stdout is not None and attacker.stdout.readline().strip() == "ready", kind
                time.sleep(0.5)  # the attack is under way when the probe starts
                measured = _p99s(_result(_child(["probe", url, seconds, rate], env)))
                answers = _result(attacker)
                out["attacks"][kind] = {
                    **measured, **{f"{name.removesuffix('_p99_ms')}_ratio": round(value / idle[name], 2)
                                   for name, value in measured.items()},
                    "attack_answers": answers["statuses"], "rss_mb_after": _rss_mb(server.pid)}
            # the machine's own noise: idle again, as a ratio to the first idle (an attack's ratio
            # within this one's distance from 1 cannot be told from the machine's other work)
            again = _p99s(_result(_child(["probe", url, seconds, rate], env)))
            out["idle_again_ratio"] = {name.removesuffix("_p99_ms"): round(value / idle[name], 2)
                                       for name, value in again.items()}
            return out
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=2000, help="Synthetic tasks of the victim project.")
    parser.add_argument("--seconds", type=float, default=15.0, help="Probe duration, idle and per attack.")
    parser.add_argument("--rate", type=float, default=10.0, help="Healthz probes per second (reads: a fifth).")
    parser.add_argument("--smoke", action="store_true", help="A tiny size: the figures mean nothing.")
    parser.add_argument("--json", action="store_true", help="Print one JSON object.")
    parser.add_argument("--attacks", nargs="+", choices=ATTACKS, default=list(ATTACKS), help="Which attacks to run.")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        role, *rest = args.child
        if role == "setup":
            print(json.dumps(setup(Path(rest[0]), int(rest[1]))))
        elif role == "probe":
            print(json.dumps(probe(rest[0], float(rest[1]), float(rest[2]))))
        else:
            print(json.dumps(attack(rest[0], rest[1], float(rest[2]), rest[3] == "smoke")))
        return
    if args.smoke:
        args.tasks, args.seconds = 0, 0.5  # the victim reads an empty project: no seeding process
    out = run(args)
    if args.json:
        print(json.dumps(out))
        return
    print(f"idle: healthz p99 {out['idle']['healthz_p99_ms']} ms, victim read p99 {out['idle']['victim_read_p99_ms']} "
          f"ms, RSS {out['idle_rss_mb']} MB")
    for kind, figures in out["attacks"].items():
        print(f"{kind:>18}: healthz p99 {figures['healthz_p99_ms']} ms ({figures['healthz_ratio']}x), victim read "
              f"p99 {figures['victim_read_p99_ms']} ms ({figures['victim_read_ratio']}x), answers "
              f"{figures['attack_answers']}, RSS {figures['rss_mb_after']} MB")
    print(f"idle again / idle: {out['idle_again_ratio']}")


if __name__ == "__main__":
    main()
