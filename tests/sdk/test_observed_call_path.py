"""A warm observed or governed provider call does no per-call work it can do once.

``observe()`` and the governor's provider hook are held to the first try's cost per request
(``bench/instructions.py --provider``). The openai client itself runs importlib's helpers on
every call (imports inside its functions); ours must add none: an ``import`` statement in
the hook's per-request path costs about a microsecond each time. And an observed call
answered at once is one compact event from its call site's template (built once per
client and host): no first try, typed request record or breaker update per call.
Counted, not timed: the real openai client answered by an in-process transport (no network).
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

from retrylens.sdk import Governor, observe
from retrylens.sdk.core.first_try import FirstTry, compact_template
from retrylens.sdk.integrations.providers import http_attempts, provider_hook
from retrylens.sdk.integrations.providers.observing import stop_observing

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


@contextmanager
def calls_of(*functions: Any) -> Iterator[list[str]]:
    """The names of ``functions`` called while the block runs, once per call."""
    codes = {f.__code__: f.__qualname__ for f in functions}
    seen: list[str] = []

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code in codes:
            seen.append(codes[frame.f_code])

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


#: per-call work an observed call answered at once used to do, now done once per call site
#: (the compact template) or not at all (the observer's governor decides nothing, so its
#: breaker and retry throttle, both disabled, need no outcome)
_ONCE_PER_SITE = (
    FirstTry.__init__,
    compact_template.__wrapped__,
    http_attempts.of_response,
    Governor.observe_success,
)


def test_an_observed_call_answered_at_once_builds_its_site_once(
    ask: Callable[[], object],
) -> None:
    events: list[Any] = []
    observe(emit=events.append)
    with calls_of(*_ONCE_PER_SITE) as first:
        ask()
    with calls_of(*_ONCE_PER_SITE) as warm:
        for _ in range(3):
            ask()
    assert [e.kind for e in events] == ["attempt_succeeded"] * 4  # one compact event a call
    assert "FirstTry.__init__" in first  # the site's template, built with the first call
    assert warm == []
