"""Writes the published JSON Schema file; a test keeps the file in sync with the model."""

from __future__ import annotations

from pathlib import Path

import orjson

from .event import json_schema

SCHEMA_FILE = Path(__file__).with_name("retry_event.v1.schema.json")


def render_json_schema() -> bytes:
    return orjson.dumps(json_schema(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def write_json_schema(path: Path = SCHEMA_FILE) -> Path:
    path.write_bytes(render_json_schema())
    return path
