"""A real local webhook receiver that can be down, flaky or slow, and a black hole.

The server is real (``http.server`` on a port of its own); only its behaviour is scripted:
``fail_next`` answers those statuses first (``Retry-After`` with each, when set), ``delay_s``
holds every answer, and :meth:`Receiver.stop`/:meth:`Receiver.start` take it down and back up
on the same port. ``posts`` are every request that reached it, ``received`` the ones it
acknowledged (2xx).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Receiver:
    def __init__(self, path: str = "/hook") -> None:
        self.port = free_port()
        self.path = path
        self.posts: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.fail_next: list[int] = []
        self.retry_after: str | None = None
        self.location: str | None = None  # sent with a 3xx answer
        self.delay_s = 0.0
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    def start(self) -> Receiver:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.posts.append(body)
                owner.headers.append(dict(self.headers))
                time.sleep(owner.delay_s)
                status = owner.fail_next.pop(0) if owner.fail_next else 202
                if 200 <= status < 300:
                    owner.received.append(body)
                self.send_response(status)
                if owner.retry_after and status >= 400:
                    self.send_header("Retry-After", owner.retry_after)
                if owner.location and 300 <= status < 400:
                    self.send_header("Location", owner.location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        # a short poll: stop() waits for the loop's next look (up to 0.5 s by default)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class BlackHole:
    """A port that accepts connections (the kernel's backlog) and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"

    def close(self) -> None:
        self.sock.close()


class Clock:
    """Virtual epoch seconds for the dispatcher."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
