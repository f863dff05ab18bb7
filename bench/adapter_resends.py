"""Requests a provider received vs what RetryLens recorded, under the three adapters.

Two tables, each row one run against a local fake provider that never recovers (429 with
``retry-after-ms: 5``), on a governor with virtual time (its backoff never sleeps):

* ``resends`` — a plain ``httpx`` client in the obvious hand-written loop (resend a 429,
  at most 5 tries) as the model call of pydantic-ai's ``run_governed`` (a
  ``FunctionModel``), a LangChain chat model under ``.with_retry(stop_after_attempt=3)``
  with the callback handler, and a function under ``@tenacity.retry`` with the hooks
  (``stop_after_attempt(4)``); sync and async; the default policy and a 2-attempt budget.
  Columns: ``requests`` the provider received, ``attempts`` recorded, the policy's
  ``budget`` (its attempt budget). The target: requests == attempts <= budget.
* ``as_sent`` — decisions that would change the request: ``models_sent`` (the ``model``
  of each request the provider received) vs ``dependencies`` (each recorded attempt's),
  and the degradations recorded vs the switches the provider saw.

Usage: ``python bench/adapter_resends.py [--json]`` (a few seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import httpx  # noqa: E402
import openai  # noqa: E402
import tenacity  # noqa: E402
from fake_provider import RATE_LIMITED, FakeProvider  # noqa: E402

from retrylens.schemas import Decision, EventKind  # noqa: E402
from retrylens.sdk import Governor, RetryPolicy  # noqa: E402
from retrylens.sdk.core.policy import BreakerPolicy, TaskBudget  # noqa: E402
from retrylens.testing import CapturedEvents, capture_events  # noqa: E402

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
POLICIES = {
    "default": RetryPolicy(),
    "2-attempt budget": RetryPolicy(budget=TaskBudget(max_attempts=2)),
}


def _governor(captured: CapturedEvents, policy: RetryPolicy) -> Governor:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    return Governor.with_virtual_time(policy, start=start, emit=captured.emit, rng=random.Random(1))


def _loop(url: str) -> str:
    with httpx.Client(timeout=5) as client:
        for _ in range(5):
            response = client.post(f"{url}/v1/chat/completions", json=BODY)
            if response.status_code != 429:
                break
        response.raise_for_status()
        return response.text


async def _aloop(url: str) -> str:
    async with httpx.AsyncClient(timeout=5) as client:
        for _ in range(5):
            response = await client.post(f"{url}/v1/chat/completions", json=BODY)
            if response.status_code != 429:
                break
        response.raise_for_status()
        return response.text


def _tenacity(url: str, governor: Governor, is_async: bool) -> None:
    from retrylens.sdk.integrations.tenacity import TenacityHooks

    hooks = TenacityHooks(governor, goal="g", agent="a", dependency="llm")
    retry = tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(4)))

    async def aask() -> str:
        return await _aloop(url)

    if is_async:
        asyncio.run(retry(aask)())
    else:
        retry(lambda: _loop(url))()


def _pydantic_ai(url: str, governor: Governor, is_async: bool) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from retrylens.sdk.integrations.pydantic_ai import run_governed_sync

    def model(messages: Any, info: Any) -> ModelResponse:
        return ModelResponse(parts=[TextPart(_loop(url))])

    async def amodel(messages: Any, info: Any) -> ModelResponse:
        return ModelResponse(parts=[TextPart(await _aloop(url))])

    run_governed_sync(Agent(FunctionModel(amodel if is_async else model)), "hi", governor)


def _langchain(url: str, governor: Governor, is_async: bool) -> None:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    from retrylens.sdk.integrations.langchain import RetryLensCallbackHandler

    def result(text: str) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    class Chat(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "plain-httpx"

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
            return result(_loop(url))

        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
            return result(await _aloop(url))

    handler = RetryLensCallbackHandler(governor, agent="a")
    model = Chat().with_retry(stop_after_attempt=3, exponential_jitter_params={"max": 0.001})
    config: Any = {"callbacks": [handler]}
    try:
        if is_async:
            asyncio.run(model.ainvoke("hi", config=config))
        else:
            model.invoke("hi", config=config)
    finally:
        handler.close()


ADAPTERS = {"tenacity": _tenacity, "pydantic-ai": _pydantic_ai, "langchain": _langchain}


def _attempts(captured: CapturedEvents) -> int:
    return len(captured.of_kind(EventKind.ATTEMPT_STARTED))


def resends() -> list[dict[str, Any]]:
    rows = []
    for adapter, run in ADAPTERS.items():
        for is_async in (False, True):
            for name, policy in POLICIES.items():
                with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
                    try:
                        run(fake.url, _governor(captured, policy), is_async)
                    except Exception:  # noqa: BLE001, S110 - the provider never recovers
                        pass
                    rows.append(
                        {
                            "adapter": adapter,
                            "mode": "async" if is_async else "sync",
                            "policy": name,
                            "requests": fake.count,
                            "attempts": _attempts(captured),
                            "budget": policy.budget.max_attempts,
                        }
                    )
    return rows


def _fallback_runs() -> dict[str, Any]:
    """pydantic-ai over the openai client ("m" falls back to "m-mini"), and the tenacity hooks
    over it with a fallback dependency the request cannot name (with and without a breaker)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from retrylens.sdk.integrations.pydantic_ai import run_governed_sync
    from retrylens.sdk.integrations.tenacity import TenacityHooks

    def pydantic_ai(url: str, governor: Governor) -> None:
        provider = OpenAIProvider(base_url=f"{url}/v1", api_key="sk-test")
        run_governed_sync(Agent(OpenAIChatModel("m", provider=provider)), "hi", governor)

    def tenacity_openai(url: str, governor: Governor) -> None:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test")
        hooks = TenacityHooks(governor, goal="g", dependency="openai")
        retry = tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(2)))
        retry(lambda: client.chat.completions.create(model="m", messages=BODY["messages"]))()

    breaker = BreakerPolicy(window=2, min_calls=2, failure_ratio=0.5)
    return {
        "pydantic-ai, fallbacks m -> m-mini": (pydantic_ai, RetryPolicy(fallbacks={"m": "m-mini"})),
        "tenacity, fallbacks openai -> backup": (
            tenacity_openai,
            RetryPolicy(fallbacks={"openai": "backup"}),
        ),
        "tenacity, same, breaker of 2 calls": (
            tenacity_openai,
            RetryPolicy(fallbacks={"openai": "backup"}, breaker=breaker),
        ),
    }


def as_sent() -> list[dict[str, Any]]:
    rows = []
    for name, (run, policy) in _fallback_runs().items():
        with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
            try:
                run(fake.url, _governor(captured, policy))
            except Exception:  # noqa: BLE001, S110 - the provider never recovers
                pass
            sent = [str(r["body"].get("model")) for r in fake.requests]
            decisions = [d.decision for d in captured.of_kind(EventKind.DECISION)]
            rows.append(
                {
                    "run": name,
                    "models_sent": sent,
                    "dependencies": [
                        e.dependency for e in captured.of_kind(EventKind.ATTEMPT_STARTED)
                    ],
                    "degradations_recorded": decisions.count(Decision.DEGRADE_DEPENDENCY),
                    "switches_sent": sum(1 for a, b in zip(sent, sent[1:], strict=False) if a != b),
                    "last_decision": decisions[-1].value if decisions else "",
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="accepted for the smoke run: this bench is already tiny")
    args = parser.parse_args()
    figures = {"resends": resends(), "as_sent": as_sent()}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print("| adapter | mode | policy | requests | attempts | budget |")
    print("|---|---|---|---:|---:|---:|")
    for r in figures["resends"]:
        print(
            f"| {r['adapter']} | {r['mode']} | {r['policy']} | {r['requests']} | {r['attempts']} | {r['budget']} |"
        )
    print()
    print(
        "| run | models sent | attempts' dependencies | degradations recorded | switches sent | last decision |"
    )
    print("|---|---|---|---:|---:|---|")
    for r in figures["as_sent"]:
        print(
            f"| {r['run']} | {', '.join(r['models_sent'])} | {', '.join(r['dependencies'])} | "
            f"{r['degradations_recorded']} | {r['switches_sent']} | {r['last_decision']} |"
        )


if __name__ == "__main__":
    main()
