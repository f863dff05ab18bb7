"""How long one project's page waits when another project's receivers are black holes.

Issue 37 measured 101.8 s: twenty rules of one project posting to a receiver that never
answers delayed another project's alert, because posts ran one after another inside the
evaluation loop. Here the real outbox and dispatcher (``analytics/alert_delivery.py``) run
against real local sockets, side by side in one run:

* ``alone_ms`` — the baseline: project ``b``'s page, queued with nothing else, until its
  receiver has it;
* ``beside_black_hole_ms`` — the same page queued after ``--rules`` pages of project ``a``
  to a receiver that accepts connections and never answers (each post bounded by
  ``--timeout-s``);
* ``serial_bound_s`` — what a loop posting one after another would have made ``b`` wait
  (``rules × timeout``), for scale.

Each figure is the median of ``--runs``. Target: ``beside_black_hole_ms`` within 2x of
``alone_ms`` + 50 ms (the dispatcher's poll), whatever ``rules`` is.

Usage: ``python bench/alert_delivery.py [--json] [--smoke] [--rules N] [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from retrylens.analytics.alert_delivery import Dispatcher
from retrylens.analytics.alert_outbox import Outbox


class _Receiver:
    def __init__(self) -> None:
        self.arrived = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                owner.arrived.set()

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _page(key: str, rule: str) -> dict[str, str]:
    return {"dedup_key": key, "status": "firing", "rule_id": rule, "slice_value": "", "rule_name": rule,
            "at": "2027-01-15T08:00:00+00:00"}


def _wait_for_b(rules: int, timeout_s: float) -> float:
    """Milliseconds from queueing until project b's receiver has its page."""
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(256)
    hole_url = f"http://127.0.0.1:{hole.getsockname()[1]}/hook"
    receiver, outbox = _Receiver(), Outbox()
    dispatcher = Dispatcher(outbox, timeout_s=timeout_s)
    stop = dispatcher.start(poll_s=0.05)
    try:
        now = time.time()
        began = time.perf_counter()
        for n in range(rules):
            outbox.enqueue(project="a", receiver=hole_url, trusted=True, payload=_page(f"a{n}", f"a{n}"), now=now)
        outbox.enqueue(project="b", receiver=receiver.url, trusted=True, payload=_page("b", "b"), now=now)
        dispatcher.wake()
        if not receiver.arrived.wait(rules * timeout_s + 30):
            raise RuntimeError("project b's page never arrived")
        return (time.perf_counter() - began) * 1000
    finally:
        stop()
        receiver.close()
        hole.close()
        outbox.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=int, default=20)
    parser.add_argument("--timeout-s", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: that it runs, not its figures")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.rules, args.timeout_s, args.runs = 2, 0.5, 1
    alone, beside = [], []
    for _ in range(args.runs):  # alternate, so a busy moment weighs on both alike
        alone.append(_wait_for_b(0, args.timeout_s))
        beside.append(_wait_for_b(args.rules, args.timeout_s))
    result = {
        "rules": args.rules, "timeout_s": args.timeout_s, "runs": args.runs,
        "alone_ms": round(statistics.median(alone), 1),
        "beside_black_hole_ms": round(statistics.median(beside), 1),
        "serial_bound_s": args.rules * args.timeout_s,
    }
    result["target_met"] = result["beside_black_hole_ms"] <= 2 * result["alone_ms"] + 50
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:22} {value}")


if __name__ == "__main__":
    main()
