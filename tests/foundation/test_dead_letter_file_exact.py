"""Embedded mode's dead letters, byte for byte (``ingest/dead_letter_file.py``), and the
Native block's refusal of a row missing a column (``store/native_block.py``).

A dead letter is only worth keeping if the refused message can be read back from it: the
reason, where it was read, its key and its exact bytes (base64: a message need not be
UTF-8). Pure tests; with the chain's tests they are the mutation targets
``dead_letter_file`` and ``native_block`` (``infra/mutation_targets/ingest_store.py``).
"""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest
from factories import make_event

from retrylens.ingest.dead_letter_file import DeadLetterFile
from retrylens.ingest.processor import InvalidMessage, InvalidReason, SourceRef
from retrylens.store.event_table import event_row
from retrylens.store.native_block import encode_native


def _invalid(offset: int) -> InvalidMessage:
    return InvalidMessage(InvalidReason.BAD_JSON, "not JSON", SourceRef("spool:agent", 3, offset))


def test_a_dead_letter_keeps_the_reason_the_source_the_key_and_the_exact_bytes(tmp_path: Path) -> None:
    sink = DeadLetterFile(tmp_path / "letters" / "dead_letters.jsonl")
    raw = b"\xff{not json \x00"
    sink.publish(_invalid(17), key=b"task-\xe9", value=raw)
    sink.publish(_invalid(18), key=None, value=None)
    assert not sink.path.exists() and sink.written == 0, "nothing is written before the flush"
    sink.flush()
    letters = [orjson.loads(line) for line in sink.path.read_bytes().splitlines()]
    assert letters == [
        {"reason": InvalidReason.BAD_JSON.value, "detail": "not JSON", "source": "spool:agent:3:17",
         "key": "task-\ufffd", "value_b64": base64.b64encode(raw).decode()},
        {"reason": InvalidReason.BAD_JSON.value, "detail": "not JSON", "source": "spool:agent:3:18",
         "key": "", "value_b64": ""},
    ]
    assert base64.b64decode(letters[0]["value_b64"]) == raw
    assert sink.written == 2


def test_a_flush_appends_only_what_was_published_since_the_last(tmp_path: Path) -> None:
    sink = DeadLetterFile(tmp_path / "dead_letters.jsonl")
    sink.publish(_invalid(1), key=b"a", value=b"x")
    sink.flush()
    sink.flush()  # nothing pending: nothing written, the count unchanged
    sink.publish(_invalid(2), key=b"b", value=b"y")
    sink.flush()
    sources = [orjson.loads(line)["source"] for line in sink.path.read_bytes().splitlines()]
    assert sources == ["spool:agent:3:1", "spool:agent:3:2"] and sink.written == 2


def test_a_row_missing_a_column_is_refused_not_shifted_into_the_others() -> None:
    row = event_row(make_event(), topic="t", partition=0, offset=0)
    assert encode_native([row, row]) != b""
    with pytest.raises(ValueError, match="zip"):
        encode_native([row, row[:-1]])
