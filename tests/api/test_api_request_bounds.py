"""Every request is bounded before it costs the server: a compressed body inflates only up to
``api_max_inflated_bytes`` (413 as soon as it passes), a pre-check's features are bounded
(422 naming the bound)."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import pytest
from apitest_support import ACME

from retrylens.api.otlp_decode import INFLATE_STEP, inflate
from retrylens.api.precheck_bounds import (
    MAX_FEATURE_NAME_CHARS,
    MAX_FEATURE_TEXT_CHARS,
    MAX_FEATURES,
)
from retrylens.errors import OtlpDecodeError, OtlpTooLarge

MIB = 1024 * 1024


def _bomb(inflated: int) -> bytes:
    """A gzip body of zeros that inflates to ``inflated`` bytes (a thousandth of that, compressed)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(MIB)
    return b"".join(packer.compress(block) for _ in range(inflated // MIB)) + packer.flush()


def test_a_gzip_bomb_is_refused_having_inflated_no_more_than_the_limit_and_one_step():
    bomb = _bomb(256 * MIB)
    tracemalloc.start()
    try:
        with pytest.raises(OtlpTooLarge):
            inflate(bomb, "gzip", 4 * MIB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * (4 * MIB + INFLATE_STEP)  # the output buffer may double once as it grows


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_inflation_within_the_limit_gives_the_body_back_byte_exact(encoding: str):
    body = b'{"resourceSpans": []}' * 50_000
    packed = gzip.compress(body) if encoding == "gzip" else zlib.compress(body)
    assert inflate(packed, encoding, len(body)) == body
    with pytest.raises(OtlpTooLarge):
        inflate(packed, encoding, len(body) - 1)


def test_every_member_of_a_multi_member_gzip_body_is_inflated():
    assert inflate(gzip.compress(b"first ") + gzip.compress(b"second"), "gzip", 100) == b"first second"


@pytest.mark.parametrize("body", [gzip.compress(b"x" * 1000, mtime=0)[:-12], b"\x1f\x8b garbage"])
def test_a_truncated_or_broken_gzip_body_is_a_decode_error(body: bytes):
    with pytest.raises(OtlpDecodeError) as raised:
        inflate(body, "gzip", MIB)
    assert not isinstance(raised.value, OtlpTooLarge)


def test_the_traces_route_answers_413_for_a_body_that_inflates_past_the_limit(bare_client):
    bomb = _bomb(bare_client.app.state.settings.api_max_inflated_bytes + MIB)
    assert len(bomb) < bare_client.app.state.settings.api_max_body_bytes
    response = bare_client.post("/v1/traces", content=bomb, headers={
        **ACME, "Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})
    assert response.status_code == 413, response.text
    assert "api_max_inflated_bytes" in response.json()["detail"]


def _precheck(client, features: dict) -> object:
    return client.post("/v1/precheck", headers=ACME, json={
        "project": "acme", "agent": "planner", "task_input": "refund the invoice", "features": features})


@pytest.mark.parametrize(("features", "says"), [
    ({str(i): 1 for i in range(80_000)}, f"at most {MAX_FEATURES} are scored"),  # ~1 MiB, the body limit
    ({f"f{i}": i for i in range(MAX_FEATURES + 1)}, f"at most {MAX_FEATURES} are scored"),
    ({"n" * (MAX_FEATURE_NAME_CHARS + 1): 1}, f"at most {MAX_FEATURE_NAME_CHARS}"),
    ({"model": "m" * (MAX_FEATURE_TEXT_CHARS + 1)}, f"at most {MAX_FEATURE_TEXT_CHARS}"),
])
def test_a_precheck_past_the_feature_bounds_is_a_422_naming_the_bound(bare_client, features, says):
    response = _precheck(bare_client, features)
    assert response.status_code == 422, response.text
    assert says in response.json()["message"]
    assert response.json()["detail"][0]["loc"] == ["body", "features"]


def test_a_precheck_at_the_feature_bounds_is_scored(bare_client):
    features = {f"f{i:0{MAX_FEATURE_NAME_CHARS - 1}d}": "v" * MAX_FEATURE_TEXT_CHARS for i in range(MAX_FEATURES)}
    assert _precheck(bare_client, features).status_code == 200


def test_the_feature_bounds_are_in_the_openapi_schema(bare_client):
    schema = bare_client.get("/openapi.json").json()["components"]["schemas"]["PrecheckBody"]["properties"]["features"]
    assert (schema["maxProperties"], schema["propertyNames"]["maxLength"]) == (MAX_FEATURES, MAX_FEATURE_NAME_CHARS)
