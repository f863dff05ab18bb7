"""tenacity and LangChain run for real (fake chat models, no network) and emit events."""

from __future__ import annotations

import random

import pytest
import tenacity
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import JsonOutputParser

import retrylens.sdk as sdk
from retrylens.schemas import Decision, EventKind, TaskOutcome
from retrylens.sdk import Governor, PolicySource
from retrylens.sdk.integrations.langchain import RetryLensCallbackHandler, governed_runnable
from retrylens.sdk.integrations.tenacity import TenacityHooks
from retrylens.testing import capture_events


def test_tenacity_hooks_turn_tenacity_retries_into_events() -> None:
    with capture_events() as captured:
        hooks = TenacityHooks(
            Governor(emit=captured.emit, rng=random.Random(1)),
            goal="sync erp",
            agent="billing",
            dependency="erp",
        )
        calls = []

        @tenacity.retry(
            **hooks.kwargs(
                stop=tenacity.stop_after_attempt(4),
                wait=tenacity.wait_fixed(0.001),
                retry=tenacity.retry_if_exception_type(IOError),
            )
        )
        def sync() -> str:
            calls.append(1)
            if len(calls) < 3:
                raise ConnectionResetError("erp reset the connection")
            return "synced"

        assert sync() == "synced"
        kinds = captured.kinds()
        decisions = captured.of_kind(EventKind.DECISION)
    assert kinds.count("attempt_started") == 3 and kinds.count("attempt_failed") == 2
    assert [d.decision for d in decisions] == [Decision.RETRY_BACKOFF] * 2 and decisions[
        0
    ].backoff_ms == 1
    assert captured.of_kind(EventKind.TASK_FINISHED)[0].outcome is TaskOutcome.SUCCEEDED


def test_tenacity_stop_and_governor_veto_are_recorded() -> None:
    source = PolicySource()
    with capture_events() as captured:
        hooks = TenacityHooks(Governor(source, emit=captured.emit), goal="g", agent="billing")
        retrying = tenacity.Retrying(
            **hooks.kwargs(stop=tenacity.stop_after_attempt(2), reraise=True)
        )
        with pytest.raises(TimeoutError):
            retrying(lambda: (_ for _ in ()).throw(TimeoutError("slow")))
        source.kill(agent="billing")
        calls = []

        def once() -> None:
            calls.append(1)
            raise TimeoutError("slow")

        with pytest.raises(TimeoutError):
            tenacity.Retrying(**hooks.kwargs(stop=tenacity.stop_after_attempt(5), reraise=True))(
                once
            )
        reasons = [d.decision_reason for d in captured.of_kind(EventKind.DECISION)]
    assert any("stop condition" in r for r in reasons) and any("kill switch" in r for r in reasons)
    assert len(calls) == 1


def test_governed_runnable_patches_the_prompt_after_malformed_model_output() -> None:
    model = FakeListChatModel(
        responses=["Sure, the total is twelve euros.", '{"total": 12, "currency": "EUR"}']
    )
    chain = model | JsonOutputParser()
    with capture_events() as captured:
        governor = Governor(emit=captured.emit, rng=random.Random(2), sleep=lambda s: None)
        result = governed_runnable(chain, governor, agent="extractor", dependency="fake").invoke(
            "total of invoice 7"
        )
        decisions = captured.decisions()
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
    assert result == {"total": 12, "currency": "EUR"}
    assert failed[0].error_type == "schema_mismatch" and decisions == [Decision.PATCH_PROMPT]


def test_callback_handler_records_model_calls_and_errors() -> None:
    model = GenericFakeChatModel(
        messages=iter([AIMessage(content="hello"), AIMessage(content="again")])
    )
    with capture_events() as captured:
        handler = RetryLensCallbackHandler(
            Governor(emit=captured.emit, rng=random.Random(4)), agent="chat"
        )
        model.invoke("hi", config={"callbacks": [handler]})
        chain = model | JsonOutputParser()
        with pytest.raises(OutputParserException):
            chain.invoke("again", config={"callbacks": [handler]})
        handler.close()
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        outcomes = sorted(captured.outcomes().values())
        decisions = captured.decisions()
    # two operations; the parser's rejection fails the second model call's attempt
    assert outcomes == [TaskOutcome.FAILED, TaskOutcome.SUCCEEDED]
    assert [(f.attempt, f.error_type.value) for f in failed] == [(1, "schema_mismatch")]
    assert decisions == [Decision.GIVE_UP]


def test_public_surface_is_explicit_and_importable() -> None:
    assert len(sdk.__all__) == len(set(sdk.__all__)) <= 60
    for name in sdk.__all__:
        assert getattr(sdk, name) is not None
    assert {n for n in dir(sdk) if not n.startswith("_") and n[0].isupper()} <= set(sdk.__all__)
