"""litellm's own retries under ``observe()`` are one task's attempts (issue 35 item 5).

``litellm.completion(num_retries=n)`` retries twice over: the openai client it drives
retries ``n`` times inside the first call, then litellm's wrapper calls the completion
again up to ``n`` times (``completion_with_retries``, tenacity), each a new client call.
Counted per client call that was one task of ``n + 1`` attempts and ``n`` tasks of one;
the litellm call is now one task whose attempts are every request the provider received.

The REAL litellm (installed into the test venv by ``infra/test.sh``, not a dependency of
the project) against the local fake provider; slow: importing litellm takes seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply, openai_completion

from retrylens.schemas import EventKind, TaskOutcome
from retrylens.sdk.integrations.providers.observing import observe, stop_observing
from retrylens.testing import CapturedEvents, capture_events

pytestmark = [
    pytest.mark.slow,
    # litellm's own logging object warns under pydantic 2.14, with or without RetryLens
    pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning"),
]

HI = [{"role": "user", "content": "hi"}]
#: A 500 the openai client retries after 1 ms (not its default half-second backoff).
BROKEN = Reply(
    500,
    {"retry-after-ms": "1"},
    json.dumps({"error": {"message": "the server broke", "type": "server_error"}}).encode(),
)


@pytest.fixture(scope="module")
def litellm() -> Any:
    # litellm fetches its model price map from the network at import unless told not to
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


@pytest.fixture
def captured(litellm: Any) -> Iterator[CapturedEvents]:
    with capture_events() as events:
        observe(emit=events.emit)
        try:
            yield events
        finally:
            stop_observing()


def attempts(captured: CapturedEvents) -> int:
    return len(captured.of_kind(EventKind.ATTEMPT_FAILED)) + len(
        captured.of_kind(EventKind.ATTEMPT_SUCCEEDED)
    )


def ask(litellm: Any, url: str, **kwargs: Any) -> Any:
    return litellm.completion(
        model="openai/gpt-test", api_base=f"{url}/v1", api_key="sk-test", messages=HI, **kwargs
    )


def test_a_litellm_call_that_gives_up_is_one_task_with_every_request(
    litellm: Any, captured: CapturedEvents
) -> None:
    with FakeProvider(default=BROKEN) as fake:
        with pytest.raises(litellm.InternalServerError):
            ask(litellm, fake.url, num_retries=5)
        received = fake.count
    assert received == 11  # 1 + the client's 5 retries, then litellm's own 5
    assert attempts(captured) == received
    assert len({e.task_id for e in captured.events}) == 1
    assert list(captured.outcomes().values()) == [TaskOutcome.FAILED]
    assert {e.dependency for e in captured.events} == {"litellm"}


def test_a_litellm_call_that_recovers_in_its_own_retries_is_one_succeeded_task(
    litellm: Any, captured: CapturedEvents
) -> None:
    script = [BROKEN] * 7 + [Reply(body=openai_completion("at last"))]
    with FakeProvider(script) as fake:
        answer = ask(litellm, fake.url, num_retries=5)
        assert answer.choices[0].message.content == "at last"
        received = fake.count
    assert received == 8
    assert attempts(captured) == 8
    assert len(captured.of_kind(EventKind.ATTEMPT_FAILED)) == 7
    assert len({e.task_id for e in captured.events}) == 1
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]


def test_an_async_litellm_call_with_its_retries_is_one_task(
    litellm: Any, captured: CapturedEvents
) -> None:
    script = [BROKEN] * 7 + [Reply(body=openai_completion("async"))]
    with FakeProvider(script) as fake:
        answer = asyncio.run(
            litellm.acompletion(
                model="openai/gpt-test",
                api_base=f"{fake.url}/v1",
                api_key="sk-test",
                messages=HI,
                num_retries=5,
            )
        )
        assert answer.choices[0].message.content == "async"
        received = fake.count
    assert attempts(captured) == received
    assert len({e.task_id for e in captured.events}) == 1
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]


def test_a_litellm_call_answered_at_once_is_one_compact_event(
    litellm: Any, captured: CapturedEvents
) -> None:
    with FakeProvider([Reply(body=openai_completion("now"))]) as fake:
        assert ask(litellm, fake.url).choices[0].message.content == "now"
        assert fake.count == 1
    assert [e.kind for e in captured.events] == [EventKind.ATTEMPT_SUCCEEDED]
    assert attempts(captured) == 1


def test_litellm_imported_after_observe_is_wrapped_and_the_sdk_never_needs_it() -> None:
    """The import hook wraps litellm as it loads; before that, nothing of the SDK (the
    observer, the hook, this integration's module) imports it; uninstall restores it."""
    with FakeProvider(default=BROKEN) as fake:
        code = textwrap.dedent(
            f"""
            import os, sys
            os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
            import retrylens.sdk, retrylens.sdk.integrations.litellm
            events = []
            retrylens.sdk.observe(emit=events.append)
            print("=", "litellm" in sys.modules)
            import litellm
            try:
                litellm.completion(model="openai/gpt-test", api_base="{fake.url}/v1",
                                   api_key="sk-test", messages={HI!r}, num_retries=2)
            except litellm.InternalServerError:
                pass
            kinds = [e.kind.value for e in events]
            print("=", len({{e.task_id for e in events}}),
                  kinds.count("attempt_failed") + kinds.count("attempt_succeeded"))
            from retrylens.sdk import provider_hook
            wrapped = litellm.completion
            provider_hook.uninstall()
            print("=", litellm.completion is wrapped.__retrylens_original__)
            """
        )
        out = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", code],
            capture_output=True,
            text=True,
            timeout=240,
            check=True,
        ).stdout.splitlines()
        received = fake.count
    out = [line[2:] for line in out if line.startswith("= ")]  # litellm prints help lines too
    assert out[0] == "False"
    assert out[1] == f"1 {received}"
    assert out[2] == "True"
