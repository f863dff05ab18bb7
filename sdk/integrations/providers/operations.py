"""Begin and end an observer's operation without ever changing the observed call.

Both roads of :func:`retrylens.sdk.observe` — a stainless client's call
(:mod:`.provider_calls`) and a plain httpx request to a provider (:mod:`.plain_calls`) —
and :func:`retrylens.sdk.integrations.providers.observing.model_call` open and close operations here. It lives
apart from both roads because :mod:`.provider_send` loads :mod:`.plain_calls` and is
loaded by :mod:`.provider_calls`: one of them importing the other would close a cycle.
"""

from __future__ import annotations

from typing import Any


def begin(observer: Any, client: str) -> Any:
    """A new operation of ``observer`` for a call of ``client`` (``None`` if that failed)."""
    try:
        return observer.begin(client)
    except Exception:  # noqa: BLE001 - observing never changes the call
        return None


def end(observer: Any, operation: Any, error: BaseException | None, result: Any) -> None:
    """End ``operation`` with the call's error or result; observing never changes the call."""
    if operation is None:
        return
    try:
        observer.end(operation, error, result)
    except Exception:  # noqa: BLE001 - observing never changes the call
        return
