"""Every piece of state the server keeps between requests, with two tenants: one tenant's
traffic never evicts or changes another's.

The server's state is listed here, each piece with what it holds; a piece added later fails
:func:`test_every_piece_of_server_state_is_known` until it is listed (and, if it caches per
tenant, tested below).
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from apitest_support import ACME, GLOBEX

from retrylens.api import fingerprint_index
from retrylens.api.fingerprint_index import FingerprintIndex
from retrylens.api.otlp_memory import MAX_TRACES

pytestmark = pytest.mark.clickhouse

#: app.state → what it holds between requests
STATE = {
    "settings": "configuration, read only",
    "store": "the store's client",
    "keyring": "the keys, read only",
    "intake": "the road events take; it keeps no reads",
    "precheck_log": "a write buffer; each row is stored under its own project",
    "shadow_reports": "where shadow reports come from, read only",
    "scorer": "per-project caches (SCORER below) and the one model every project is scored with",
    "policies": "reads and writes the store, keeps nothing",
    "started": "the start time",
    "otlp_book": "per project: traces, bounds and LRU order of its own (api.otlp_memory)",
    "cost_budget": "per project: the CPU seconds its exports may still cost (api.cost_budget; one tenant's "
                   "spending never another's: tests/api/test_cost_budget.py)",
}
#: RiskScorer's attributes → what they hold
SCORER = {
    "settings": "configuration", "store": "the store's client", "model_check_s": "a setting",
    "fingerprints": "per project: fingerprint histories, similar failures, direct reads (tested below)",
    "base_rates": "per project: each agent's failure rate (a key reads only its own projects)",
    "_linear": "the one model's weights", "_model": "the one model", "_model_checked_at": "a time",
    "_models": "the model folder",
}


def test_every_piece_of_server_state_is_known(app):
    assert set(app.state._state) == set(STATE)
    assert set(vars(app.state.scorer)) == set(SCORER)


def _otlp(trace: str, spans: list[dict[str, Any]]) -> bytes:
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "billing"}}]},
        "scopeSpans": [{"spans": [
            {"traceId": s.get("trace", trace), "spanId": s["id"], "parentSpanId": s.get("parent", ""),
             "name": s["name"], "startTimeUnixNano": "1760000000000000000",
             "endTimeUnixNano": "1760000001000000000", "status": {"code": s.get("code", 0)},
             "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}] if s.get("parent")
             else []} for s in spans]}]}]}).encode()


def _post(client, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    response = client.post("/v1/traces", content=gzip.compress(body), headers={
        **headers, "Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert response.status_code == 200, response.text
    return response.json()["retrylens"]


def test_another_tenants_flood_of_traces_leaves_a_half_received_trace_whole(client):
    """acme's failed chat span, then globex's 10,001 junk traces in one request, then acme's
    root: acme's trace still has its failed attempt, so the root brings its give-up decision
    (3 events: start, give-up, finish; an evicted child left 2 and the task stored as succeeded)."""
    trace, root = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    assert _post(client, ACME, _otlp(trace, [{"id": "00f067aa0ba902b7", "parent": root, "name": "chat",
                                              "code": 2}]))["events"] == 2
    junk = [{"trace": f"{i + 1:032x}", "id": root, "name": "junk"} for i in range(MAX_TRACES + 1)]
    _post(client, GLOBEX, _otlp(trace, junk))
    assert _post(client, ACME, _otlp(trace, [{"id": root, "name": "workflow"}]))["events"] == 3


def test_one_tenants_direct_fingerprint_reads_never_push_out_anothers(seeded, monkeypatch):
    """With partial indexes (every lookup read from the store and remembered), globex reading
    more fingerprints than the cache holds leaves acme's remembered answer in place."""
    monkeypatch.setattr(fingerprint_index, "MAX_MISSES", 3)
    index = FingerprintIndex(seeded, max_fingerprints=0)
    assert index.lookup("acme", "abc", io=True) is not None
    for i in range(5):
        index.lookup("globex", f"fp-{i}", io=True)
    assert index.lookup("acme", "abc", io=False) is not None  # from memory: no store read needed
