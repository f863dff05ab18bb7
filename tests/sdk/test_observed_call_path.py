"""A warm observed or governed provider call runs no more import machinery than the plain call.

``observe()`` and the governor's provider hook are held to the first try's cost per request
(``bench/instructions.py --provider``). The openai client itself runs importlib's helpers on
every call (imports inside its functions); ours must add none: an ``import`` statement in
the hook's per-request path costs about a microsecond each time. Counted, not timed: the
real openai client answered by an in-process transport (no network).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
import openai
import pytest

from retrylens.sdk import Governor, observe, provider_hook
from retrylens.sdk.observing import stop_observing

_ANSWER = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()


@contextmanager
def import_machinery() -> Iterator[list[str]]:
    seen: list[str] = []

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and "importlib" in frame.f_code.co_filename:
            seen.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


def _machinery_of(call: Callable[[], object]) -> list[str]:
    for _ in range(3):
        call()
    with import_machinery() as seen:
        call()
    return sorted(seen)


@pytest.fixture
def ask() -> Iterator[Callable[[], object]]:
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(
            200, content=_ANSWER, headers={"content-type": "application/json"}
        )
    )
    client = openai.OpenAI(
        base_url="http://provider.test/v1",
        api_key="sk-test",
        http_client=httpx2.Client(transport=transport),
    )
    yield lambda: client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}]
    )
    stop_observing()


def test_an_observed_call_adds_no_import_machinery(ask: Callable[[], object]) -> None:
    events: list[Any] = []
    provider_hook.uninstall()
    plain = _machinery_of(ask)
    observe(emit=events.append)
    observed = _machinery_of(ask)
    assert events, "the observed calls were recorded"
    assert observed == plain


def test_a_governed_call_adds_no_import_machinery(ask: Callable[[], object]) -> None:
    events: list[Any] = []
    governor = Governor(emit=events.append)  # installs the hook
    plain = _machinery_of(lambda: ask())
    governed = _machinery_of(lambda: governor.call(ask, goal="say hi", dependency="openai"))
    assert events, "the governed calls were recorded"
    assert governed == plain
