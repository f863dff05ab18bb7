"""A local fake LLM provider for tests: a real HTTP server speaking OpenAI's and Anthropic's wire format.

The test scripts what each request gets (``Reply``: a status, headers, a body, or a stream
of server-sent events), starts the server on a loopback port, and points the REAL client
at ``server.url``. Every request is kept (path and headers) so a test can compare what
the provider received with what RetryLens recorded.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer. ``drop=True`` closes the connection without an answer."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    events: list[bytes] | None = None  # server-sent events, for a streaming answer
    drop: bool = False
    reset: bool = False  # read the request, then reset the connection (RST, no answer)
    cut_stream: bool = False  # stop the stream half-way (a broken connection)
    delay_s: float = 0.0  # the provider takes this long before it answers


def openai_completion(text: str = "hello") -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
    ).encode()


def openai_stream(text: str = "hello") -> list[bytes]:
    chunks = []
    for i, piece in enumerate([text[: len(text) // 2], text[len(text) // 2 :]]):
        chunk = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": piece}
                    if i == 0
                    else {"content": piece},
                    "finish_reason": None,
                }
            ],
        }
        chunks.append(f"data: {json.dumps(chunk)}\n\n".encode())
    chunks.append(b"data: [DONE]\n\n")
    return chunks


def anthropic_message(text: str = "hello") -> bytes:
    return json.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 2},
        }
    ).encode()


def anthropic_stream(text: str = "hello") -> list[bytes]:
    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    message = json.loads(anthropic_message(""))
    message["content"] = []
    return [
        event("message_start", {"type": "message_start", "message": message}),
        event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
        ),
        event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
        ),
        event("message_stop", {"type": "message_stop"}),
    ]


RATE_LIMITED = Reply(
    429,
    {"retry-after-ms": "5"},
    json.dumps({"error": {"message": "Rate limit reached", "type": "rate_limit"}}).encode(),
)
OVERLOADED = Reply(
    529,
    {},
    json.dumps(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    ).encode(),
)


#: how often the server's loop looks for a shutdown (the stdlib's default 0.5 s was most of a test)
POLL_S = 0.01

class FakeProvider:
    """The server: ``script`` answers requests in order; past its end, ``default`` answers."""

    def __init__(self, script: list[Reply] | None = None, default: Reply | None = None) -> None:
        self.script = list(script or [])
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with provider._lock:
                    provider.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "body": body}
                    )
                    reply = provider.script.pop(0) if provider.script else provider.default
                if reply is None:
                    reply = Reply(500, body=b'{"error": {"message": "unscripted"}}')
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.reset:  # SO_LINGER 0: close() sends a reset, not a FIN
                    self.close_connection = True
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    return
                if reply.drop:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.events is not None:
                    self.send_header("content-type", "text/event-stream")
                    payload = b"".join(
                        reply.events[: len(reply.events) // 2] if reply.cut_stream else reply.events
                    )
                    if reply.cut_stream:
                        # promise more than is sent, then hang up: a stream broken mid-way
                        self.send_header("content-length", str(len(payload) + 100))
                        self.end_headers()
                        self.wfile.write(payload)
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                data = reply.body or b""
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        # A short poll: shutdown() waits for serve_forever's next look at its flag, which the
        # default 0.5 s poll made up to half a second per server (a test starts hundreds).
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": POLL_S},
                                        daemon=True)

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def count(self) -> int:
        return len(self.requests)
