"""``observe()`` records a provider call whichever was set up first: it or an OpenTelemetry
instrumentation of the openai client (openinference's ``instrument()``, which wraps
``OpenAI.request``, and the OTel openai-v2 instrumentation, which wraps the resources).

Called after openinference, ``observe()`` used to record nothing for a host not on the
known-provider list: the instrumentation's wrapper held the client's unpatched ``request``.
Each case starts from unpatched clients (the hook uninstalled), sets both up in its order,
and sends one call that the real openai client retries twice at a local fake provider
(127.0.0.1, no known host): one task of three attempts must be recorded.
"""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from fake_provider import RATE_LIMITED, FakeProvider, Reply, openai_completion
from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as GenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from retrylens.schemas import EventKind
from retrylens.sdk import observe
from retrylens.sdk.integrations.providers import provider_hook
from retrylens.sdk.integrations.providers.observing import stop_observing
from retrylens.testing import capture_events

HI = [{"role": "user", "content": "hi"}]
INSTRUMENTORS = {"openinference": OpenInferenceInstrumentor, "otel-openai-v2": GenAIInstrumentor}


@pytest.fixture
def unpatched() -> Iterator[None]:
    provider_hook.uninstall()
    yield
    stop_observing()
    provider_hook.uninstall()


@pytest.mark.parametrize("order", ["instrument first", "observe first"])
@pytest.mark.parametrize("name", INSTRUMENTORS)
def test_observe_records_the_call_in_either_order(unpatched, name: str, order: str) -> None:
    instrumentation = INSTRUMENTORS[name]()
    with capture_events() as captured:
        try:
            if order == "instrument first":
                instrumentation.instrument(tracer_provider=TracerProvider())
                observe(emit=captured.emit, spans=False)
            else:
                observe(emit=captured.emit, spans=False)
                instrumentation.instrument(tracer_provider=TracerProvider())
            script = [RATE_LIMITED, RATE_LIMITED, Reply(body=openai_completion("hi"))]
            with FakeProvider(script) as fake:
                client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
                client.chat.completions.create(model="gpt-test", messages=HI)
                assert fake.count == 3
        finally:
            stop_observing()
            provider_hook.uninstall()
            instrumentation.uninstrument()
        events = captured.events
    assert len({e.task_id for e in events}) == 1, [e.kind for e in events]
    kinds = [e.kind for e in events]
    assert kinds.count(EventKind.ATTEMPT_FAILED) == 2
    assert max(e.attempt for e in events) == 3
    assert [e.outcome for e in events if e.outcome is not None] == ["succeeded"]
