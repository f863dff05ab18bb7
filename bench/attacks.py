"""One tenant attacks, another reads: ``/healthz`` and the other tenant's reads under each attack.

    python bench/attacks.py [--tasks N] [--seconds S] [--rounds R] [--attacks ...] [--setting NAME VALUE]
                            [--json] [--smoke]

1. A setup process seeds an embedded store with ``N`` synthetic tasks of the ``victim`` project.
2. ``retrylens serve`` starts on it with two keys: ``victim`` and ``attacker``.
3. A probe process sends ``/healthz`` (``--rate`` a second) and the victim's
   ``GET /v1/projects/victim/metrics`` (a store read, a fifth as often), each on its own
   connection, open loop, for ``S`` seconds, each timed from when it was due (so a stall counts
   for every request it delayed).
4. Per attack, ``R`` rounds: in each, one probe with the server idle (after the server has
   ingested what an earlier attack left) and one while the attacker, from another process on
   two connections, sends one of these back to back (idle first in odd rounds, the attack
   first in even ones):

   - ``gzip_bomb``: ``/v1/traces`` with a 1 MiB gzip body inflating to 1 GiB;
   - ``otlp_retention``: ``/v1/traces`` protobuf requests of ~1 MB, new traces each, every span
     with 300 attributes the mapping never reads (the server's RSS growth is reported);
   - ``precheck_features``: ``/v1/precheck`` with 80,000 features (~1 MiB);
   - ``deep_nesting``: ``/v1/events`` with a body nested 100,000 levels deep.

Prints, per attack, each round's p99s and their ratio to that round's idle, and the median
ratio of the rounds (target: ≤ 2), the attack's answers by status and the server's RSS after
it; and the spread of the idle probes' p99s (max / min: the machine's own noise, which on a
shared machine moves by more than 2x within minutes, hence rounds side by side and medians).
``--json``: one object. ``--smoke``: a tiny size, one round (a suite test runs it) whose
figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import _free_port, _percentile, _wait_healthy  # noqa: E402

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
        span = scope.spans.add(trace_id=batch.to_bytes(8, "big") + (i + 1).to_bytes(8, "big"), span_id=b"\x01" * 8,
                               name="chat", start_time_unix_nano=1_760_000_000 * 10**9,
                               end_time_unix_nano=1_760_000_001 * 10**9)
        for k in range(attributes):
            span.attributes.add(key=f"junk.{k}").value.string_value = "v"
    return request.SerializeToString()


#: the first half of every trace id of the template request (:class:`OtlpBodies`), replaced per request
_MARK = 0x5EED_F00D_5EED_F00D


class OtlpBodies:
    """New traces in every request without serializing 60,000 attributes each time: one request
    is built once, and each copy gets its own first half of every trace id (a byte replacement of
    the same length keeps the protobuf valid). Building each request anew took the attacking
    process as much CPU as the server's whole ingest of it, on the same 2 cores and in the same
    scheduling group as the server: the bench measured the attacker's client as much as the server."""

    def __init__(self, spans: int, attributes: int) -> None:
        self.template = _otlp_request(_MARK, spans, attributes)
        self.mark = _MARK.to_bytes(8, "big")
        assert self.template.count(self.mark) == spans

    def body(self, batch: int) -> bytes:
        return self.template.replace(self.mark, (batch + 1).to_bytes(8, "big"))


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
        bodies = OtlpBodies(*((20, 30) if smoke else (200, 300)))
    statuses: Counter[int] = Counter()
    print("ready", flush=True)  # the body is built (a 1 GiB bomb takes seconds): the probe may start
    stop = time.perf_counter() + seconds

    def run() -> None:
        client = httpx.Client(base_url=url, timeout=300)
        while time.perf_counter() < stop:
            if kind == "otlp_retention":
                with lock:
                    batch = next(batches)
                answer = client.post("/v1/traces", content=bodies.body(batch),
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


def _quiet(url: str, timeout_s: float = 90.0) -> float:
    """Wait until the server has ingested what the last attack left (its spool rows stop
    growing for a second), so that the next idle probe measures an idle server; the wait in s."""
    import httpx

    start = time.perf_counter()
    last, still_since = None, time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        rows = httpx.get(f"{url}/healthz", timeout=60).json().get("spool_rows")
        if rows != last:
            last, still_since = rows, time.perf_counter()
        elif time.perf_counter() - still_since >= 1.0:
            break
        time.sleep(0.25)
    return round(time.perf_counter() - start, 1)


def _attacked(url: str, kind: str, args: argparse.Namespace, env: dict[str, str], pid: int) -> dict:
    """One probe while ``kind`` runs (the attack outlasts the probe by the probe's start-up)."""
    attacker = _child(["attack", url, kind, str(args.seconds + (0.5 if args.smoke else 5)),
                       "smoke" if args.smoke else "full"], env)
    assert attacker.stdout is not None and attacker.stdout.readline().strip() == "ready", kind
    time.sleep(0.5)  # the attack is under way when the probe starts
    cpu = _cpu_s(pid)
    measured = _p99s(_result(_child(["probe", url, str(args.seconds), str(args.rate)], env)))
    cpu = _cpu_s(pid) - cpu
    answers = _result(attacker)
    return {**measured, "server_cpu_s": round(cpu, 2), "attack_answers": answers["statuses"],
            "rss_mb_after": _rss_mb(pid)}


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the server and its worker processes have spent so far: what
    the attack cost the server, steadier than the probes' p99 on a shared machine."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            total += _cpu_s(int(child))
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return total + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ratios(attacked: dict, idle: dict) -> dict:
    return {f"{name.removesuffix('_p99_ms')}_ratio": round(attacked[name] / idle[name], 2) for name in idle}


def run(args: argparse.Namespace) -> dict:
    """Per attack, ``--rounds`` rounds of an idle probe and a probe under the attack, in
    alternating order (idle first in odd rounds, the attack first in even ones), each round's
    ratio against its own idle; the attack's ratio is the median of its rounds'. On a shared
    machine the load moves by more than 2x within a minute: a ratio against an idle measured
    minutes apart says as much about the machine as about the server."""
    import signal
    import statistics

    with tempfile.TemporaryDirectory(prefix="retrylens-attacks-", ignore_cleanup_errors=True) as folder:
        data_dir = Path(folder)
        base = {k: v for k, v in os.environ.items() if not k.startswith("RETRYLENS_")}
        port = _free_port()
        env = {**base, "RETRYLENS_DATA_DIR": str(data_dir), "RETRYLENS_API_KEYS": json.dumps(KEYS),
               "RETRYLENS_API_PORT": str(port), "RETRYLENS_KAFKA_BOOTSTRAP_SERVERS": "",
               **{f"RETRYLENS_{name.upper()}": value for name, value in args.setting}}
        # this script's own setup (bench/api.py's seeds its own project, which the victim never reads)
        seeded = _result(_child(["setup", str(data_dir), str(args.tasks)], env)) if args.tasks else {"events": 0}
        server = subprocess.Popen([sys.executable, "-m", "retrylens.cli.main", "serve", "--host", "127.0.0.1",
                                   "--port", str(port), "--log-level", "warning"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(url, server)

            def idle_probe() -> dict:
                _quiet(url)
                cpu = _cpu_s(server.pid)
                figures = _p99s(_result(_child(["probe", url, str(args.seconds), str(args.rate)], env)))
                return {**figures, "server_cpu_s": round(_cpu_s(server.pid) - cpu, 2)}

            idle = idle_probe()
            out: dict = {"tasks": seeded["events"], "seconds": args.seconds, "rounds": args.rounds, "idle": idle,
                         "settings": dict(args.setting),
                         "idle_rss_mb": _rss_mb(server.pid), "attacks": {}}
            for kind in args.attacks:
                rounds = []
                for number in range(args.rounds):
                    if number % 2 == 0:
                        calm = idle_probe()
                        hit = _attacked(url, kind, args, env, server.pid)
                    else:
                        hit = _attacked(url, kind, args, env, server.pid)
                        calm = idle_probe()
                    rounds.append({"idle": calm, **hit, **_ratios(hit, calm), "load": os.getloadavg()[0]})
                out["attacks"][kind] = {
                    **{name: round(statistics.median(r[name] for r in rounds), 2)
                       for name in ("healthz_p99_ms", "victim_read_p99_ms", "healthz_ratio", "victim_read_ratio",
                                    "server_cpu_s")},
                    "attack_answers": dict(sum((Counter(r["attack_answers"]) for r in rounds), Counter())),
                    "rss_mb_after": rounds[-1]["rss_mb_after"], "rounds": rounds}
            # the machine's own noise: the spread of the idle probes (max / min of their p99s)
            idles = [idle] + [r["idle"] for figures in out["attacks"].values() for r in figures["rounds"]]
            out["idle_spread"] = {name.removesuffix("_p99_ms"): round(max(i[name] for i in idles)
                                                                       / max(min(i[name] for i in idles), 1e-9), 2)
                                  for name in idle}
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
    parser.add_argument("--seconds", type=float, default=10.0, help="Probe duration, idle and per attack.")
    parser.add_argument("--rounds", type=int, default=5, help="Rounds of idle and attacked probes per attack.")
    parser.add_argument("--rate", type=float, default=10.0, help="Healthz probes per second (reads: a fifth).")
    parser.add_argument("--smoke", action="store_true", help="A tiny size: the figures mean nothing.")
    parser.add_argument("--json", action="store_true", help="Print one JSON object.")
    parser.add_argument("--attacks", nargs="+", choices=ATTACKS, default=list(ATTACKS), help="Which attacks to run.")
    parser.add_argument("--setting", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="A server setting (e.g. api_ingest_cpu_share 0.1); repeatable.")
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
        args.tasks, args.seconds, args.rounds = 0, 0.5, 1  # the victim reads an empty project: no seeding
    out = run(args)
    if args.json:
        print(json.dumps(out))
        return
    print(f"idle (first): healthz p99 {out['idle']['healthz_p99_ms']} ms, victim read p99 "
          f"{out['idle']['victim_read_p99_ms']} ms, RSS {out['idle_rss_mb']} MB")
    for kind, figures in out["attacks"].items():
        print(f"{kind:>18}: median of {len(figures['rounds'])} rounds: healthz {figures['healthz_ratio']}x, victim "
              f"read {figures['victim_read_ratio']}x; answers {figures['attack_answers']}, RSS "
              f"{figures['rss_mb_after']} MB")
        for number, r in enumerate(figures["rounds"], 1):
            print(f"{'':>20}round {number}: healthz {r['idle']['healthz_p99_ms']} -> {r['healthz_p99_ms']} ms "
                  f"({r['healthz_ratio']}x), read {r['idle']['victim_read_p99_ms']} -> {r['victim_read_p99_ms']} ms "
                  f"({r['victim_read_ratio']}x), load {r['load']:.1f}")
    print(f"idle p99 spread (max / min over the idle probes): {out['idle_spread']}")


if __name__ == "__main__":
    main()
