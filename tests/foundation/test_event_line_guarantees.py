"""The event line a valid message becomes, read as ClickHouse reads it (issue 25).

The consumer's insert parses these lines in C++ (``test_ingest_json_rows.py`` holds the
stored rows equal to the Native road's), so a line must be the validated event exactly,
its Kafka position first, whichever decoder validated it, and its input features must
be the text the Native road stores (orjson's: ``1e+18`` where msgspec writes ``1e18``).
Pure: the lines are what the chunk's encoder hands to the writer.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
from factories import make_event

from retrylens.ingest.encoder import encode_chunk
from retrylens.schemas import RetryEvent
from retrylens.schemas.wire import decode_wire

FEATURES: dict[str, Any] = {"tokens_estimate": 1e18, "steps": 3, "tool": "search"}
WITH_FEATURES = make_event(input_features=FEATURES).to_json_bytes()
WITHOUT_FEATURES = make_event(task_id="task-2", decision_reason="plain").to_json_bytes()
#: An attempt number sent as text: the fast decoder leaves it to pydantic (the lax road).
LAX = orjson.dumps({**orjson.loads(WITH_FEATURES), "attempt": "2"})


def _lines(values: list[bytes]) -> list[bytes]:
    chunk = encode_chunk("events", 3, list(range(40, 40 + len(values))), values)
    assert chunk.rows == len(values) and not chunk.invalid
    return chunk.block.splitlines()


def _expected(value: bytes, offset: int) -> dict[str, Any]:
    event = RetryEvent.model_validate_json(value).model_dump(mode="json")
    return {"_t": "events", "_p": 3, "_o": offset, **event}


def test_each_line_is_its_validated_event_after_its_position() -> None:
    values = [WITH_FEATURES, WITHOUT_FEATURES, LAX]
    lines = _lines(values)
    assert [orjson.loads(line) for line in lines] == [
        _expected(value, 40 + i) for i, value in enumerate(values)
    ]
    assert all(line.startswith(b'{"_t":"events","_p":3,"_o":4') for line in lines)


def test_input_features_are_written_as_the_native_road_stores_them() -> None:
    # the locked orjson writes 1e+18 where msgspec writes 1e18; at the lowest allowed orjson
    # (3.10.1) both write 1e18, so there this test tells the roads apart by nothing more
    text = b'"input_features":' + orjson.dumps(FEATURES) + b","
    strict, lax = _lines([WITH_FEATURES, LAX])
    assert text in strict and text in lax


def test_an_event_without_features_writes_them_empty() -> None:
    (line,) = _lines([WITHOUT_FEATURES])
    assert b'"input_features":{},' in line
    assert orjson.loads(line)["decision_reason"] == "plain"


#: Text a line must carry exactly: quotes, backslashes, control characters, every width of
#: UTF-8, a JSON-looking string and a field at its length limit.
HOSTILE = [
    'say "hi" \\ then \\"quote\\"',
    "tab\there\nnewline\r\x00nul\x1f\x7f",
    "é ü ß — 中文 ✓ 😀 \u2028\u2029",
    '{"_t":"forged","_o":-1}',
    "x" * 512,
]


def test_a_chunks_block_is_each_events_line_hostile_text_included() -> None:
    """The chunk's block is written in place (msgspec straight into one buffer): it must be,
    byte for byte, the events' lines one after the other, each ending with a newline."""
    values = [
        make_event(
            task_id=f"task-{i}", decision_reason=text, error_detail={"message": text, "code": "E"},
            input_features={"note": text[:200], "big": 1e18} if i % 2 else {},
        ).to_json_bytes()
        for i, text in enumerate(HOSTILE)
    ] + [LAX]
    chunk = encode_chunk("events", 3, list(range(40, 40 + len(values))), values)
    assert chunk.rows == len(values) and chunk.block.endswith(b"\n")
    lines = chunk.block.split(b"\n")[:-1]
    assert [orjson.loads(line) for line in lines] == [_expected(value, 40 + i) for i, value in enumerate(values)]
    # byte for byte what the struct encodes, after its position (the line format of issue 25)
    prefix = b'{"_t":"events","_p":3,"_o":'
    for offset, (line, value) in enumerate(zip(lines[: len(HOSTILE)], values, strict=False), start=40):
        event = decode_wire(value, fill_event_id=False)
        features = event.input_features
        event.input_features = msgspec.Raw(orjson.dumps(features)) if features else features
        assert line == b"%s%d,%s" % (prefix, offset, msgspec.json.encode(event)[1:])
