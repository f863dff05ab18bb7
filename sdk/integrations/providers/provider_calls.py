"""What the provider hook does with each call of a stainless-generated client.

:mod:`.provider_hook` puts :func:`wrap_request` / :func:`wrap_arequest` on the
``request`` method of ``SyncAPIClient`` / ``AsyncAPIClient`` (openai, anthropic and
their kin), the one method every API call of such a client goes through, its own
retries included:

* inside a governed attempt, the call runs with ``max_retries=0``: the governor owns the
  retrying (``RETRYLENS_PROVIDER_RETRIES=client`` leaves it to the client), and a resend
  the send hook refused reaches the governor as itself, not as the client's connection
  error wrapping it;
* under :func:`retrylens.sdk.observe`, the call is one operation of the observer
  (:data:`~retrylens.sdk.core.attempt_scope.operation` while it runs), each request the send hook sees a
  physical attempt of it. What the call returns or raises is untouched.
"""

from __future__ import annotations

import functools
from typing import Any

from ...core import attempt_scope
from . import provider_send
from .operations import begin, end


def wrap_request(original: Any) -> Any:
    @functools.wraps(original)
    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        if attempt_scope.current.get() is not None:
            try:
                return original(self, *_without_retries(args), **kwargs)
            except Exception as error:
                refused = provider_send.refused_cause(error)
                if refused is None:
                    raise
                raise refused from None
        recorder = attempt_scope.recorded.get()
        if recorder and recorder is not True:  # an adapter's model call: the governor retries
            return recorder.request(original, self, args, kwargs)
        observer = provider_send.observer
        if observer is None or recorder:  # an adapter records this call
            return original(self, *args, **kwargs)
        var = attempt_scope.operation
        if var.get() is not None:
            return original(self, *args, **kwargs)
        operation = begin(observer, _client_name(self))
        token = var.set(operation)
        try:
            result = original(self, *args, **kwargs)
        except BaseException as error:
            end(observer, operation, error, None)
            raise
        finally:
            var.reset(token)
        end(observer, operation, None, result)
        return result

    return request


def wrap_arequest(original: Any) -> Any:
    @functools.wraps(original)
    async def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        if attempt_scope.current.get() is not None:
            try:
                return await original(self, *_without_retries(args), **kwargs)
            except Exception as error:
                refused = provider_send.refused_cause(error)
                if refused is None:
                    raise
                raise refused from None
        recorder = attempt_scope.recorded.get()
        if recorder and recorder is not True:  # an adapter's model call: the governor retries
            return await recorder.arequest(original, self, args, kwargs)
        observer = provider_send.observer
        if observer is None or recorder:  # an adapter records this call
            return await original(self, *args, **kwargs)
        var = attempt_scope.operation
        if var.get() is not None:
            return await original(self, *args, **kwargs)
        operation = begin(observer, _client_name(self))
        token = var.set(operation)
        try:
            result = await original(self, *args, **kwargs)
        except BaseException as error:
            end(observer, operation, error, None)
            raise
        finally:
            var.reset(token)
        end(observer, operation, None, result)
        return result

    return request


def _without_retries(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``request(cast_to, options, …)``'s arguments with ``max_retries=0`` on the options.

    Inside a governed attempt the client makes one request per call whatever fails
    (anthropic retries a connection error whatever its type), as with ``max_retries=0``;
    options of an unexpected shape pass unchanged (the send hook still refuses retries).
    """
    if not provider_send.owns_retries() or len(args) < 2:
        return args
    try:
        options = args[1].model_copy(update={"max_retries": 0})
    except Exception:  # noqa: BLE001 - not the options we know
        return args
    return (args[0], options, *args[2:])


def _client_name(client: Any) -> str:
    """The package a client comes from (``openai``, ``anthropic``…): its operation's name."""
    return type(client).__module__.partition(".")[0]
