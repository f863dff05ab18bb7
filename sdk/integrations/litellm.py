"""litellm's own retries under :func:`retrylens.sdk.observe`: one task per litellm call.

``litellm.completion(num_retries=n)`` retries twice over, out of any client's sight: the
openai client it drives retries inside the first call, then litellm's wrapper calls the
completion again (``completion_with_retries``, tenacity), each time a new client call. The
provider hook groups requests per client call (:mod:`.providers.provider_calls`), so one litellm
call used to be recorded as several tasks. :mod:`.providers.provider_hook` wraps litellm's
``completion`` and ``acompletion`` with this module once ``litellm`` is imported (as an
instrumentor would): under ``observe()`` the litellm call is one operation of the
observer, and every request sent inside it, by whichever client and whichever retry, is
one attempt of it (:data:`~retrylens.sdk.core.attempt_scope.operation`, which the inner client calls join).

Inside a governed attempt or an adapter's model call, and when not observing, the call is
litellm's own: those record the requests themselves. What the call returns or raises is
never changed. litellm is not a dependency of the SDK: nothing here imports it.
"""

from __future__ import annotations

import functools
from typing import Any

from ..core import attempt_scope
from .providers import provider_send
from .providers.operations import begin, end

#: The module-level callables of ``litellm`` (and ``litellm.main``) this module wraps.
WRAPPED = (("completion", False), ("acompletion", True))
CLIENT = "litellm"


def _observer() -> Any:
    """The observer to report to, or ``None`` when this call is recorded elsewhere."""
    if (
        attempt_scope.current.get() is not None
        or attempt_scope.recorded.get()
        or attempt_scope.operation.get() is not None
    ):
        return None  # a governed attempt, an adapter's call, or already one operation
    return provider_send.observer


def wrap_completion(original: Any) -> Any:
    @functools.wraps(original)
    def completion(*args: Any, **kwargs: Any) -> Any:
        observer = _observer()
        if observer is None:
            return original(*args, **kwargs)
        operation = begin(observer, CLIENT)
        token = attempt_scope.operation.set(operation)
        try:
            result = original(*args, **kwargs)
        except BaseException as error:
            end(observer, operation, error, None)
            raise
        finally:
            attempt_scope.operation.reset(token)
        end(observer, operation, None, result)
        return result

    return completion


def wrap_acompletion(original: Any) -> Any:
    @functools.wraps(original)
    async def acompletion(*args: Any, **kwargs: Any) -> Any:
        observer = _observer()
        if observer is None:
            return await original(*args, **kwargs)
        operation = begin(observer, CLIENT)
        token = attempt_scope.operation.set(operation)
        try:
            result = await original(*args, **kwargs)
        except BaseException as error:
            end(observer, operation, error, None)
            raise
        finally:
            attempt_scope.operation.reset(token)
        end(observer, operation, None, result)
        return result

    return acompletion
