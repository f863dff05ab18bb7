"""Where one pre-check's server time goes, beside healthz: in process per stage, and over HTTP.

    python bench/precheck_stages.py [--requests N] [--http-requests M] [--json]

Issue 22 keeps the pre-check's p99 within 1.5 × healthz's (``bench/api.py``). That ratio
moves with whatever else runs on a shared machine; the CPU a request costs the server moves
much less, so this script measures that, on ``bench/api.py``'s seeded store (3,000 synthetic
tasks, a trained model) and its request mix (500 texts × 3 agents, drawn at random):

1. **In process, per stage** (the thread's CPU time; ``--clock wall`` for wall time). The app is driven through its ASGI interface with no socket, a
   freshly created app per run so caches start cold as in a bench round. Each request is
   timed whole (pre-check and healthz alternated), and the stages of a pre-check are timed
   by wrapping the functions the route calls (FastAPI's dependency solving and response
   serialisation, ``RiskScorer.score`` and the parts it calls). A stage absent from the code
   under test is left out, so the same script profiles older trees.
2. **Over HTTP, sequentially.** ``retrylens serve`` on the same store, one client, one
   keep-alive connection per endpoint, no concurrency: each request's client latency and the
   server's main-thread CPU per request (``/proc/<pid>/task/<pid>/stat``: the event loop's
   own work, not the background threads'), healthz and pre-check in alternating blocks.

Figures are medians (µs, ms); ``--json`` prints one object. Run it under each tree's own
environment to compare trees (the script imports only what both have).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import api as bench_api  # noqa: E402 - bench/api.py: the seeded store, texts, server start-up

AGENTS = ("planner", "coder", "researcher")


def _bodies(count: int, seed: int = 1) -> list[bytes]:
    """Pre-check bodies drawn as ``bench/api.py``'s load draws them."""
    texts = bench_api._texts(500)
    rng = random.Random(seed)
    return [json.dumps({"project": bench_api.PROJECT, "agent": rng.choice(AGENTS),
                        "task_input": rng.choice(texts)}).encode() for _ in range(count)]


class StageTimer:
    """Time per call of wrapped functions, by label, while ``active`` (during pre-checks).

    ``clock`` is the thread's CPU time by default: on a machine other jobs load, wall time
    counts the moments the process waited for a core, CPU time only its own work."""

    def __init__(self, clock: Callable[[], int] = time.thread_time_ns) -> None:
        self.times: dict[str, list[int]] = defaultdict(list)
        self.active = False
        self.clock = clock

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        times = self.times[label]
        if asyncio.iscoroutinefunction(original):
            @functools.wraps(original)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                started = self.clock()
                try:
                    return await original(*args, **kwargs)
                finally:
                    if self.active:
                        times.append(self.clock() - started)
            setattr(owner, name, timed_async)
            return

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = self.clock()
            try:
                return original(*args, **kwargs)
            finally:
                if self.active:
                    times.append(self.clock() - started)
        setattr(owner, name, timed)


def _install(timer: StageTimer) -> None:
    import fastapi.routing as routing

    from retrylens.analytics import classifier, explain, similar_failures
    from retrylens.api import fast_model, fingerprint_index
    from retrylens.api import precheck as route
    from retrylens.sdk.text import features

    timer.wrap(routing, "solve_dependencies", "fastapi: dependencies and body")
    timer.wrap(routing, "serialize_response", "fastapi: response serialisation")
    timer.wrap(route.RiskScorer, "score", "score")
    timer.wrap(route, "task_features", "score: input features (memoised)")
    timer.wrap(features, "extract_input_features", "score: input features, computed (a miss)")
    timer.wrap(fingerprint_index.FingerprintIndex, "similar", "score: similar failures (memoised)")
    timer.wrap(similar_failures.SimilarFailures, "nearest", "score: similar failures, searched (a miss)")
    timer.wrap(route, "content_words", "score: content words")
    timer.wrap(classifier.RiskModel, "model_input", "score: model input")
    timer.wrap(fast_model.LinearRiskScorer, "risk", "score: linear risk")
    timer.wrap(route, "top_reasons", "score: top reasons")
    timer.wrap(explain, "contribution", "score: a reason in words")
    timer.wrap(route, "advise", "score: advice")
    timer.wrap(route, "model_status", "score: model status")
    timer.wrap(route, "PrecheckResponse", "score: response model")
    timer.wrap(route, "stored_row", "stored row")


async def _call(app: Any, method: str, path: str, body: bytes = b"",
                headers: tuple[tuple[bytes, bytes], ...] = ()) -> int:
    """One request through the app's ASGI interface; returns the status."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"bench"), (b"content-length", str(len(body)).encode()), *headers],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    status = [0]

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await asyncio.Event().wait()  # the client never disconnects mid-request
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status[0] = message["status"]

    await app(scope, receive, send)
    return status[0]


def in_process(data_dir: Path, requests: int, clock_name: str = "cpu") -> dict[str, Any]:
    """Per-stage and whole-request medians of ``requests`` pre-checks, healthz alternated."""
    from retrylens.api.app import create_app
    from retrylens.config import load_settings
    from retrylens.store import open_store

    settings = load_settings(data_dir=data_dir, api_keys={bench_api.PROJECT: bench_api.KEY})
    clock = time.thread_time_ns if clock_name == "cpu" else time.perf_counter_ns
    timer = StageTimer(clock)
    _install(timer)
    app = create_app(settings, open_store(settings))
    bodies = _bodies(requests)
    headers = ((b"content-type", b"application/json"), (b"x-api-key", bench_api.KEY.encode()))
    whole: dict[str, list[int]] = {"precheck": [], "healthz": []}

    async def run() -> None:
        for _ in range(20):  # as bench/api.py: connections, model load, caches of the first input
            assert await _call(app, "POST", "/v1/precheck", bodies[0], headers) == 200
            await _call(app, "GET", "/healthz")
        for body in bodies:
            timer.active = True
            started = clock()
            assert await _call(app, "POST", "/v1/precheck", body, headers) == 200
            whole["precheck"].append(clock() - started)
            timer.active = False
            started = clock()
            assert await _call(app, "GET", "/healthz") == 200
            whole["healthz"].append(clock() - started)

    asyncio.run(run())
    app.state.precheck_log.close()

    def summary(values: list[int]) -> dict[str, float]:
        return {"calls_per_precheck": round(len(values) / requests, 2),
                "median_us": round(statistics.median(values) / 1000, 1),
                "mean_us_per_precheck": round(sum(values) / requests / 1000, 1)}

    return {"requests": requests, "clock": clock_name,
            "precheck_mean_us": round(statistics.mean(whole["precheck"]) / 1000, 1),
            "healthz_mean_us": round(statistics.mean(whole["healthz"]) / 1000, 1),
            "precheck_median_us": round(statistics.median(whole["precheck"]) / 1000, 1),
            "healthz_median_us": round(statistics.median(whole["healthz"]) / 1000, 1),
            "stages": {label: summary(values) for label, values in timer.times.items() if values}}


def _main_thread_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def over_http(data_dir: Path, requests: int, blocks: int) -> dict[str, Any]:
    """Sequential requests to ``retrylens serve``: client latency and server main-thread CPU."""
    import httpx

    bodies = [json.loads(b) for b in _bodies(requests * blocks, seed=2)]
    with bench_api.serving(data_dir) as (url, server, _env):
        with httpx.Client(base_url=url, headers={"X-API-Key": bench_api.KEY}, timeout=10) as pre, \
                httpx.Client(base_url=url, timeout=10) as health:
            for _ in range(20):
                pre.post("/v1/precheck", json=bodies[0])
                health.get("/healthz")
            calls: dict[str, Callable[[int], httpx.Response]] = {
                "precheck": lambda i: pre.post("/v1/precheck", json=bodies[i]),
                "healthz": lambda _i: health.get("/healthz"),
            }
            cpu: dict[str, list[float]] = {"precheck": [], "healthz": []}
            latency: dict[str, list[float]] = {"precheck": [], "healthz": []}
            for block in range(blocks):
                for name, call in calls.items():
                    before = _main_thread_cpu_s(server.pid)
                    for i in range(block * requests, (block + 1) * requests):
                        sent = time.perf_counter()
                        assert call(i).status_code == 200
                        latency[name].append((time.perf_counter() - sent) * 1000)
                    cpu[name].append((_main_thread_cpu_s(server.pid) - before) / requests * 1000)
    out: dict[str, Any] = {"requests_per_block": requests, "blocks": blocks}
    for name in ("precheck", "healthz"):
        out[f"{name}_latency_p50_ms"] = round(bench_api._percentile(latency[name], 0.5), 3)
        out[f"{name}_latency_p99_ms"] = round(bench_api._percentile(latency[name], 0.99), 3)
        out[f"{name}_server_cpu_ms"] = round(statistics.median(cpu[name]), 3)
        out[f"{name}_server_cpu_ms_blocks"] = [round(v, 3) for v in cpu[name]]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=3000, help="Synthetic tasks seeded and trained on.")
    parser.add_argument("--requests", type=int, default=750, help="Pre-checks in process (a bench round's count).")
    parser.add_argument("--http-requests", type=int, default=500, help="Requests per block over HTTP (0: skip).")
    parser.add_argument("--http-blocks", type=int, default=4, help="Blocks per endpoint over HTTP, alternated.")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="In process: the thread's CPU time (robust to other jobs' load) or wall time.")
    parser.add_argument("--json", action="store_true", help="Print one JSON object.")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true", help="tiny size: the test suite's smoke run")
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.requests, args.http_requests = 100, 20, 0  # bench/api.py's smoke run serves HTTP
    if args.child:
        print(json.dumps(in_process(Path(args.child[0]), int(args.child[1]), args.child[2])))
        return
    with tempfile.TemporaryDirectory(prefix="retrylens-bench-stages-", ignore_cleanup_errors=True) as tmp:
        data_dir = Path(tmp)
        env = bench_api._env(data_dir, bench_api._free_port())
        bench_api._run_child(["--child", "setup", str(data_dir), str(args.tasks)], env)
        # the in-process run owns the store; it runs in a child so that the server can open it next
        result = subprocess.run([sys.executable, __file__, "--child", str(data_dir), str(args.requests), args.clock], env=env,
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise SystemExit(f"in-process run failed:\n{result.stderr[-3000:]}")
        report: dict[str, Any] = {"in_process": json.loads(result.stdout.strip().splitlines()[-1]),
                                  "load_average": [round(v, 2) for v in os.getloadavg()]}
        if args.http_requests > 0:
            report["http"] = over_http(data_dir, args.http_requests, args.http_blocks)
        report["load_average_after"] = [round(v, 2) for v in os.getloadavg()]
    if args.json:
        print(json.dumps(report))
        return
    inside = report["in_process"]
    print(f"in process ({inside['clock']} time), {inside['requests']} requests each: pre-check median "
          f"{inside['precheck_median_us']} µs (mean {inside['precheck_mean_us']}), healthz median "
          f"{inside['healthz_median_us']} µs (mean {inside['healthz_mean_us']})")
    for label, stage in sorted(inside["stages"].items(), key=lambda kv: -kv[1]["mean_us_per_precheck"]):
        print(f"  {label:45} {stage['calls_per_precheck']:5.2f}/pre-check  median {stage['median_us']:7.1f} µs  "
              f"mean per pre-check {stage['mean_us_per_precheck']:7.1f} µs")
    if "http" in report:
        http = report["http"]
        for name in ("precheck", "healthz"):
            print(f"over HTTP, sequential, {name:8}: p50 {http[f'{name}_latency_p50_ms']:.3f} ms, "
                  f"p99 {http[f'{name}_latency_p99_ms']:.3f} ms, server main-thread CPU "
                  f"{http[f'{name}_server_cpu_ms']:.3f} ms/request (blocks {http[f'{name}_server_cpu_ms_blocks']})")
    print(f"load average {report['load_average']} → {report['load_average_after']}")


if __name__ == "__main__":
    main()
