"""The OTLP road held to the truth harness: a simulated fleet exported as OpenTelemetry spans.

The seeded fleet runs under the governor with its spans recorded (``retrylens.sdk.integrations.otel``),
then the spans are re-shaped as a GenAI instrumentation writes them — an ``invoke_agent``
root per task, one ``chat <model>`` span per attempt with ``gen_ai.*`` attributes,
``error.type``, ``http.response.status_code`` and an ERROR status on a failure, nothing of
RetryLens's own — and sent through ``POST /v1/traces``. The metrics read back must equal
what the simulation knows it ran, for everything a trace can say: tasks, outcomes with and
without retry, calls, failures, retries and tokens.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from importlib import resources

import orjson
import pytest
import yaml
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from retrylens.analytics.metrics import metrics_summary
from retrylens.api.app import create_app
from retrylens.ingest.spool_ingestor import SpoolIngestor
from retrylens.sdk.integrations.otel import traced
from retrylens.simulation import run_fleet
from retrylens.simulation.scenario import parse_scenario

pytestmark = pytest.mark.clickhouse
START = (datetime.now(UTC) - timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
#: what a trace carries, so what the OTLP road must get exactly right
TRACEABLE = ("tasks", "calls", "failures", "retries", "tasks_retried", "tasks_recovered",
             "successful_without_retry", "successful_with_retry", "failed_with_retry", "failed_without_retry")


def _as_instrumented(span) -> dict:
    """One exported span as OTLP/JSON, shaped like a GenAI instrumentation's (no retrylens.*)."""
    a = dict(span.attributes or {})
    is_attempt = "retrylens.attempt" in a
    model = str(a.get("gen_ai.request.model") or a.get("retrylens.dependency") or "model")
    attrs: dict = {"gen_ai.operation.name": "chat" if is_attempt else "invoke_agent"}
    if is_attempt:
        attrs["gen_ai.request.model"] = model
        for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "error.type",
                    "http.response.status_code"):
            if a.get(key) is not None:
                attrs[key] = a[key]
    else:
        attrs["gen_ai.agent.name"] = a.get("gen_ai.agent.name", "")
    code = {"UNSET": 0, "OK": 1, "ERROR": 2}[span.status.status_code.name]
    parent = span.parent.span_id if span.parent is not None else 0
    return {
        "traceId": f"{span.context.trace_id:032x}", "spanId": f"{span.context.span_id:016x}",
        "parentSpanId": f"{parent:016x}" if parent else "",
        "name": f"chat {model}" if is_attempt else span.name,
        "startTimeUnixNano": str(span.start_time), "endTimeUnixNano": str(span.end_time),
        "attributes": [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) and not isinstance(v, bool)
                        else {"stringValue": str(v)}} for k, v in attrs.items()],
        "status": {"code": code},
    }


def _otlp_body(spans: list, agent_of: dict[str, str]) -> bytes:
    by_agent: dict[str, list[dict]] = {}
    for span in spans:
        by_agent.setdefault(agent_of[f"{span.context.trace_id:032x}"], []).append(_as_instrumented(span))
    return orjson.dumps({"resourceSpans": [
        {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": agent}}]},
         "scopeSpans": [{"scope": {"name": "genai"}, "spans": shaped}]}
        for agent, shaped in by_agent.items()]})


@pytest.mark.parametrize("seed", [3, 11])
def test_a_fleet_sent_as_otel_spans_gives_the_same_figures_as_the_direct_road(store, settings, seed) -> None:
    scenario = parse_scenario(yaml.safe_load(
        resources.files("retrylens.simulation").joinpath("default_scenario.yaml").read_text()))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    events: list = []
    result = run_fleet(scenario, tasks=40, seed=seed, emit=traced(events.append, tracer_provider=provider),
                       start=START)
    spans = exporter.get_finished_spans()
    agent_of = {f"{s.context.trace_id:032x}": str(s.attributes.get("gen_ai.agent.name", "agent"))
                for s in spans if s.parent is None}
    app = create_app(settings.model_copy(update={"api_keys": {"otel": "key-otel-0123456789"}}), store)
    with TestClient(app) as http:
        answer = http.post("/v1/traces", content=_otlp_body(list(spans), agent_of),
                           headers={"X-API-Key": "key-otel-0123456789", "Content-Type": "application/json"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["retrylens"]["rejected"] == []
    SpoolIngestor(settings, store).drain()  # what `retrylens serve` does with the spool
    got, truth = metrics_summary(store, source="raw"), result.truth
    assert {n: getattr(got, n) for n in TRACEABLE} == {n: getattr(truth, n) for n in TRACEABLE}
