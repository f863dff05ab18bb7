"""``observe()`` in a traced app: one child span per physical request under the GenAI span.

The REAL instrumentations (``opentelemetry-instrumentation-openai-v2`` and
``openinference-instrumentation-openai``) record one span per client call, however many
requests the client sent; with ``observe()`` each request is a child span carrying the
HTTP conventions' ``http.request.resend_count``, ``http.response.status_code`` and
``error.type``.
"""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from fake_provider import RATE_LIMITED, FakeProvider, Reply, openai_completion
from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as GenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from retrylens.sdk import observe
from retrylens.sdk.integrations.providers.observing import stop_observing
from retrylens.testing import capture_events

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    stop_observing()


@pytest.mark.parametrize("instrumentor", [GenAIInstrumentor, OpenInferenceInstrumentor])
def test_each_request_is_a_child_span_of_the_instrumentations_span(traced, instrumentor) -> None:
    provider, exporter = traced
    instrumentation = instrumentor()
    instrumentation.instrument(tracer_provider=provider)
    try:
        with capture_events() as events:
            observe(emit=events.emit, tracer_provider=provider)
            script = [RATE_LIMITED, RATE_LIMITED, Reply(body=openai_completion("hi"))]
            with FakeProvider(script) as fake:
                client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
                client.chat.completions.create(model="gpt-test", messages=HI)
    finally:
        instrumentation.uninstrument()
    spans = exporter.get_finished_spans()
    attempts = [s for s in spans if s.instrumentation_scope.name == "retrylens.sdk.observe"]
    others = [s for s in spans if s not in attempts]
    assert len(others) == 1  # the instrumentation's one span for the whole call
    genai = others[0]
    assert [a.parent.span_id for a in attempts] == [genai.context.span_id] * 3
    assert [a.attributes.get("http.request.resend_count") for a in attempts] == [None, 1, 2]
    assert [a.attributes["http.response.status_code"] for a in attempts] == [429, 429, 200]
    assert [a.attributes.get("error.type") for a in attempts] == ["429", "429", None]
    assert all(genai.start_time <= a.start_time and a.end_time <= genai.end_time for a in attempts)


def test_without_observe_the_instrumentation_shows_one_span_for_three_requests(traced) -> None:
    provider, exporter = traced
    instrumentation = GenAIInstrumentor()
    instrumentation.instrument(tracer_provider=provider)
    try:
        script = [RATE_LIMITED, RATE_LIMITED, Reply(body=openai_completion("hi"))]
        with FakeProvider(script) as fake:
            client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
            client.chat.completions.create(model="gpt-test", messages=HI)
            assert fake.count == 3
    finally:
        instrumentation.uninstrument()
    assert len(exporter.get_finished_spans()) == 1  # the gap observe() fills
