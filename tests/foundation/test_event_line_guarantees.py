"""The event line a valid message becomes, read as ClickHouse reads it (issue 25).

The consumer's insert parses these lines in C++ (``test_ingest_json_rows.py`` holds the
stored rows equal to the Native road's), so a line must be the validated event exactly,
its Kafka position first, whichever decoder validated it, and its input features must
be the text the Native road stores (orjson's: ``1e+18`` where msgspec writes ``1e18``).
Pure: the lines are what the chunk's encoder hands to the writer.
"""

from __future__ import annotations

from typing import Any

import orjson
from factories import make_event

from retrylens.ingest.encoder import encode_chunk
from retrylens.schemas import RetryEvent

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
