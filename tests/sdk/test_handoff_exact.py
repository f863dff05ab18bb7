"""A hand-off package and its channels, exactly (mutation target ``handoff``; no governor).

What a person receives when a task is handed off is the one road by which an agent's inputs
leave the process unredacted if a line is wrong. The governor-level tests show that a name or
a secret never reaches a channel; these pin the package field by field: every text cleaned
within its limit, every value type of outputs and errors, the last 20 context messages, the
raw package as the agent had it, and each channel's delivery failure as :class:`HandoffError`.
The webhook posts to a local server (a real HTTP exchange, no fake client).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from retrylens.errors import HandoffError
from retrylens.sdk.transport.handoff import (
    CallbackChannel,
    FileChannel,
    HandoffPackage,
    WebhookChannel,
)

NAME = "Chen, Mei"
KEY = "sk-proj-Zx81QmT4vB7nR2pL9sK3wY6d"
WHEN = datetime(2026, 12, 7, 20, 0, tzinfo=UTC)


def _package(**over: object) -> HandoffPackage:
    fields: dict[str, object] = dict(
        project="shop", agent="support", task_id="t-1", reason=f"gave up: key {KEY}",
        inputs=f"refund order 7 for {NAME}", context=[{"role": "user", "content": f"I am {NAME}"}],
        outputs={"draft": f"draft for {NAME}", KEY: 1}, errors=[{"type": "RuntimeError", "message": f"rejected {KEY}"}],
        attempts=3, policy="default", failed_output=f"half a reply to {NAME}", error={"status": 429, "body": KEY},
    )
    fields.update(over)
    return HandoffPackage(**fields)  # type: ignore[arg-type]


def test_the_redacted_package_keeps_its_plain_fields_and_cleans_every_text() -> None:
    data = _package().to_dict()
    assert {k: data[k] for k in ("project", "agent", "task_id", "attempts", "policy")} == {
        "project": "shop", "agent": "support", "task_id": "t-1", "attempts": 3, "policy": "default"}
    text = json.dumps(data, ensure_ascii=False)
    assert "Chen" not in text and "Mei" not in text and "Zx81QmT4vB7nR2pL9sK3wY6d" not in text
    assert data["inputs"].startswith("refund order 7 for ") and data["context"][0]["role"] == "user"
    assert data["errors"][0]["type"] == "RuntimeError" and data["error"]["status"] == 429
    assert _package().redacted() == HandoffPackage(**data)


def test_the_raw_package_is_the_agents_own_made_json_ready() -> None:
    raw = _package(outputs={"at": WHEN, "n": 1}).to_dict(raw=True)
    assert raw["inputs"] == f"refund order 7 for {NAME}" and raw["reason"] == f"gave up: key {KEY}"
    assert raw["outputs"] == {"at": str(WHEN), "n": 1} and raw["context"] == [{"role": "user", "content": f"I am {NAME}"}]
    assert raw["failed_output"] == f"half a reply to {NAME}" and raw["error"] == {"status": 429, "body": KEY}


@pytest.mark.parametrize(("field", "limit"), [("reason", 2_000), ("inputs", 8_000), ("failed_output", 8_000)])
def test_each_text_is_kept_whole_up_to_its_limit_and_cut_past_it(field: str, limit: int) -> None:
    words = "ab " * limit
    assert _package(**{field: words[:limit]}).to_dict()[field] == words[:limit]
    assert _package(**{field: words[: limit + 1]}).to_dict()[field] == words[: limit - 1] + "…"


def test_the_context_is_its_last_twenty_messages_each_cut_at_two_thousand() -> None:
    messages = [{"role": f"r{i}", "content": f"m{i}"} for i in range(25)]
    context = _package(context=messages).to_dict()["context"]
    assert context == [{"role": f"r{i}", "content": f"m{i}"} for i in range(5, 25)]
    long = _package(context=[{"content": "ab " * 700}]).to_dict()["context"]
    assert long == [{"role": "", "content": ("ab " * 700)[:1_999] + "…"}]


def test_outputs_and_errors_keep_their_types_and_clean_every_string_keys_included() -> None:
    outputs = {"none": None, "yes": True, "n": 7, "x": 0.5, "seq": (f"to {NAME}", 1), "set": frozenset({KEY}),
               "nested": {f"for {NAME}": [KEY]}, "when": WHEN}
    data = _package(outputs=outputs, errors=[{"list": [None, 2]}]).to_dict()
    cleaned = data["outputs"]
    assert {k: cleaned[k] for k in ("none", "yes", "n", "x")} == {"none": None, "yes": True, "n": 7, "x": 0.5}
    assert type(cleaned["yes"]) is bool and type(cleaned["n"]) is int
    assert cleaned["seq"][0].startswith("to ") and "Chen" not in cleaned["seq"][0] and cleaned["seq"][1] == 1
    assert len(cleaned["set"]) == 1 and "Zx81" not in cleaned["set"][0]
    ((key, value),) = cleaned["nested"].items()
    assert key.startswith("for ") and "Chen" not in key and "Zx81" not in value[0]
    assert cleaned["when"] == str(WHEN)
    assert data["errors"] == [{"list": [None, 2]}]


def test_a_callback_channel_returns_the_callbacks_answer_and_turns_its_failure_into_a_handoff_error() -> None:
    got: list[HandoffPackage] = []
    assert CallbackChannel(lambda p: got.append(p) or "ticket-9").send(_package()) == "ticket-9"
    assert got[0].inputs != _package().inputs and "Chen" not in got[0].inputs
    assert CallbackChannel(got.append, raw=True).send(_package()) is None and got[1] == _package()

    def broken(_: HandoffPackage) -> None:
        raise KeyError("queue")

    with pytest.raises(HandoffError, match="handoff callback failed: 'queue'"):
        CallbackChannel(broken).send(_package())


def test_a_file_channel_appends_sorted_lines_to_its_file_or_a_file_in_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "existing"
    folder.mkdir()
    assert FileChannel(folder).path == folder / "handoffs.jsonl"
    assert FileChannel(f"{tmp_path}/new/").path == tmp_path / "new" / "handoffs.jsonl"
    assert FileChannel(tmp_path / "queue.jsonl").path == tmp_path / "queue.jsonl"
    channel = FileChannel(tmp_path / "two" / "deep" / "queue.jsonl")  # folders made, parents too
    channel.send(_package(task_id="a"))
    channel.send(_package(task_id="b"))
    lines = channel.path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["task_id"] for line in lines] == ["a", "b"]
    assert lines[0] == json.dumps(_package(task_id="a").to_dict(), sort_keys=True)
    raw = FileChannel(tmp_path / "raw.jsonl", raw=True)
    raw.send(_package())
    assert json.loads(raw.path.read_text(encoding="utf-8"))["inputs"] == f"refund order 7 for {NAME}"


def test_a_file_channel_that_cannot_write_raises_a_handoff_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(HandoffError, match="cannot write handoff file"):
        FileChannel(tmp_path / "file" / "queue.jsonl").send(_package())


class _Receiver(BaseHTTPRequestHandler):
    status = 200
    received: list[tuple[dict[str, str], dict]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).received.append((dict(self.headers), body))
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    _Receiver.received, _Receiver.status = [], 200
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)  # a quick shutdown
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/handoff"
    server.shutdown()
    server.server_close()


def test_a_webhook_posts_the_package_with_its_headers_and_refuses_any_answer_past_2xx(receiver: str) -> None:
    _Receiver.status = 299
    WebhookChannel(receiver, headers={"X-Team": "ops"}).send(_package())
    headers, body = _Receiver.received[-1]
    assert headers["X-Team"] == "ops" and body == _package().to_dict()
    WebhookChannel(receiver, raw=True).send(_package())
    assert _Receiver.received[-1][1]["inputs"] == f"refund order 7 for {NAME}"
    for status in (300, 404, 503):
        _Receiver.status = status
        with pytest.raises(HandoffError, match=f"answered {status}"):
            WebhookChannel(receiver).send(_package())


def test_a_webhook_waits_two_seconds_unless_told_otherwise() -> None:
    """The governor stops the task whatever the channel does; the documented default bounds how
    long a stalled receiver holds the hand-off."""
    assert WebhookChannel("http://127.0.0.1:9/handoff").timeout_s == 2.0


def test_a_webhook_nobody_answers_raises_a_handoff_error() -> None:
    with pytest.raises(HandoffError, match="unreachable"):
        WebhookChannel("http://127.0.0.1:9/handoff", timeout_s=0.5).send(_package())


def test_raw_is_only_ever_asked_for_by_name() -> None:
    """An unredacted channel must say so where it is built (``raw=True``): a stray positional
    True, or a path or callback passed by name to a channel that reads it first, is refused."""
    for build in (lambda: CallbackChannel(print, True), lambda: FileChannel("handoffs.jsonl", True),  # type: ignore[misc]
                  lambda: WebhookChannel("http://127.0.0.1:9/handoff", 2.0)):  # type: ignore[misc]
        with pytest.raises(TypeError):
            build()
    with pytest.raises(TypeError):
        _package().to_dict(True)  # type: ignore[misc]
    assert CallbackChannel(fn=print).fn is print and FileChannel(path="h.jsonl").path == Path("h.jsonl")
