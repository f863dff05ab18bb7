"""An observed call begins and ends its operation through one guard, for every kind of client.

A stainless client's call (:mod:`retrylens.sdk.integrations.providers.provider_calls`), a litellm call
(:mod:`retrylens.sdk.integrations.litellm`) and a plain httpx request to a provider
(:mod:`retrylens.sdk.integrations.providers.plain_calls`) are all operations of the observer; the
guard that keeps a failing observer from changing the call is one function pair
(:mod:`retrylens.sdk.integrations.providers.operations`), not a copy per road.
"""

from __future__ import annotations

from typing import Any

import pytest

from retrylens.sdk.integrations import litellm as litellm_calls
from retrylens.sdk.integrations.providers import operations, plain_calls, provider_calls


class BrokenObserver:
    """An observer that fails at every turn."""

    def __init__(self) -> None:
        self.ended: list[Any] = []

    def begin(self, client: str) -> Any:
        if client == "boom":
            raise RuntimeError("begin broke")
        return f"op-{client}"

    def end(self, operation: Any, error: BaseException | None, result: Any = None) -> None:
        self.ended.append((operation, error, result))
        raise RuntimeError("end broke")


def test_both_roads_use_the_one_guard() -> None:
    for road in (plain_calls, provider_calls, litellm_calls):
        for name in ("_begin", "_end", "begin", "end"):
            own = vars(road).get(name)
            assert own is None or own is getattr(operations, name.lstrip("_")), (road, name)


def test_a_broken_observer_never_changes_the_call() -> None:
    observer = BrokenObserver()
    assert operations.begin(observer, "boom") is None
    assert operations.begin(observer, "openai") == "op-openai"
    error = ValueError("x")
    operations.end(observer, "op-openai", error, None)  # end raising: swallowed
    operations.end(observer, None, None, 1)  # no operation: nothing to end
    assert observer.ended == [("op-openai", error, None)]


@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_the_client_name_is_the_operation_begun(client: str) -> None:
    assert operations.begin(BrokenObserver(), client) == f"op-{client}"
