"""Why the server's Python threads run at the API's priority: a niced thread that holds the
interpreter lock stalls every other thread of its process (``retrylens.ingest.priority``).

    python bench/gil_inversion.py [--seconds S] [--rounds R] [--burners N] [--niceness K] [--json] [--smoke]

In one process, a "loop" thread at the process's priority sleeps 5 ms and needs the interpreter
lock to wake (as the event loop does after every ``epoll_wait``), beside a "background" Python
thread busy 10 ms of every 40 (as the intake or spool-ingest thread is under a flood); ``N``
CPU burners (other processes at the process's priority) keep the cores busy, as a loaded machine
does. Rounds alternate the background thread's niceness between 0 and ``K`` (the one the server's
threads had before session 19); each round reports how late the loop thread woke (p50, p99,
max, in ms) and the median over the rounds per niceness. The loop thread's own niceness never
changes: any difference is the lock held by a background thread the kernel left waiting.

``--json``: one object. ``--smoke``: a tiny size (a suite test runs it), figures meaningless.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

BUSY_S = 0.010
IDLE_S = 0.030
TICK_S = 0.005


def _busy(niceness: int, stop: float) -> None:
    """Python work 10 ms of every 40, at ``niceness`` above the process's (Linux: per thread)."""
    if niceness and sys.platform.startswith("linux"):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + niceness))
    while time.perf_counter() < stop:
        began = time.perf_counter()
        while time.perf_counter() - began < BUSY_S:
            sum(range(200))
        time.sleep(IDLE_S)


def one_round(niceness: int, seconds: float) -> dict[str, float]:
    """The loop thread's wake-up delays (ms) beside a background thread at ``niceness``."""
    stop = time.perf_counter() + seconds
    background = threading.Thread(target=_busy, args=(niceness, stop), daemon=True)
    background.start()
    late: list[float] = []
    while not late or time.perf_counter() < stop:  # one wake-up at least: a loaded machine
        began = time.perf_counter()                 # may start the thread past a short round
        time.sleep(TICK_S)
        late.append((time.perf_counter() - began - TICK_S) * 1000)
    background.join()
    late.sort()
    return {"p50_ms": round(late[len(late) // 2], 2), "p99_ms": round(late[int(0.99 * (len(late) - 1))], 2),
            "max_ms": round(late[-1], 2), "wakeups": len(late)}


def run(seconds: float, rounds: int, burners: int, niceness: int) -> dict:
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
    try:
        out: dict = {"seconds": seconds, "burners": burners, "rounds": []}
        for number in range(rounds):
            order = (0, niceness) if number % 2 == 0 else (niceness, 0)
            for nice in order:
                out["rounds"].append({"background_niceness": nice, **one_round(nice, seconds),
                                      "load": round(os.getloadavg()[0], 2)})
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    out["median"] = {str(nice): {key: round(statistics.median(r[key] for r in out["rounds"]
                                                               if r["background_niceness"] == nice), 2)
                                 for key in ("p50_ms", "p99_ms", "max_ms")}
                     for nice in (0, niceness)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0, help="Length of each round.")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds; each runs both nicenesses.")
    parser.add_argument("--burners", type=int, default=2, help="CPU-bound processes beside it (2 cores here).")
    parser.add_argument("--niceness", type=int, default=10, help="The background thread's niceness to compare.")
    parser.add_argument("--smoke", action="store_true", help="A tiny size: the figures mean nothing.")
    parser.add_argument("--json", action="store_true", help="Print one JSON object.")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.rounds, args.burners = 0.2, 1, 0
    out = run(args.seconds, args.rounds, args.burners, args.niceness)
    if args.json:
        print(json.dumps(out))
        return
    for r in out["rounds"]:
        print(f"background niceness {r['background_niceness']:>2}: loop thread late p50 {r['p50_ms']} ms, "
              f"p99 {r['p99_ms']} ms, max {r['max_ms']} ms ({r['wakeups']} wake-ups, load {r['load']})")
    print(f"medians: {out['median']}")


if __name__ == "__main__":
    main()
