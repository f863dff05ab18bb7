"""Reading usage off a real provider answer is cheap and still finds every usage shape.

Every observed or governed call reads the answer's usage. On a pydantic model (each
openai/anthropic answer) an absent attribute costs a trip through the model's
``__getattr__`` and a raised AttributeError, several µs each; the reader asked ~10 absent
names per answer, which was most of ``observe()``'s cost per call. Counting those trips is
exact, where a timing would flake; ``bench/provider_hook.py`` has the figures.
"""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion
from pydantic import BaseModel
from pydantic._internal._model_construction import ModelMetaclass

from retrylens.sdk import Usage
from retrylens.sdk.core.usage import usage_of

_OPENAI = {
    "id": "c",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
}
_ANTHROPIC = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 2},
}


@pytest.fixture
def absent_lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names looked up on a pydantic model or model class that do not exist there."""
    seen: list[str] = []
    for owner in (BaseModel, ModelMetaclass):
        original = owner.__getattr__  # type: ignore[attr-defined]

        def counting(self: Any, name: str, _original: Any = original) -> Any:
            seen.append(name)
            return _original(self, name)

        monkeypatch.setattr(owner, "__getattr__", counting)
    return seen


def test_openai_and_anthropic_answers_give_their_usage_without_absent_lookups(
    absent_lookups: list[str],
) -> None:
    openai_answer = ChatCompletion.model_validate(_OPENAI)
    anthropic_answer = Message.model_validate(_ANTHROPIC)
    absent_lookups.clear()
    assert usage_of(openai_answer) == Usage(7, 3)
    assert usage_of(anthropic_answer) == Usage(5, 2)
    assert absent_lookups == []


def test_a_price_in_the_answers_extra_fields_and_other_shapes_are_still_read() -> None:
    priced = ChatCompletion.model_validate({**_OPENAI, "cost_usd": 0.25})
    assert usage_of(priced) == Usage(7, 3, 0.25)

    class Reply:  # LangChain's message shape, as a plain object
        def __init__(self) -> None:
            self.response_metadata = {"token_usage": {"prompt_tokens": 4, "completion_tokens": 1}}

    assert usage_of(Reply()) == Usage(4, 1)
    assert usage_of({"usage_metadata": {"input_tokens": 2, "output_tokens": 6}}) == Usage(2, 6)

    class Dynamic:  # names made on demand still answer
        def __getattr__(self, name: str) -> Any:
            if name == "usage":
                return {"input_tokens": 9, "output_tokens": 1}
            raise AttributeError(name)

    assert usage_of(Dynamic()) == Usage(9, 1)
    assert usage_of("plain text") is None
    assert usage_of(object()) is None
