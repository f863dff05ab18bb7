"""A provider client's retries inside an adapter's attempt: decided by the governor, each an attempt.

pydantic-ai's ``run_governed``, the LangChain callback handler and the tenacity hooks
record a model call as an attempt of their task, but the call itself is their framework's:
the openai or anthropic client under it resends a 429 or a 529 by itself
(``max_retries=2``), and a framework loop (tenacity, ``with_retry``) calls it again after
the client gave up, so a dead provider got up to 12 requests for a policy allowing 5.
While an adapter's attempt is in progress it sets a :class:`ClientRetries` as
:data:`attempt_scope.recorded <.attempt_scope.recorded>`, and the provider hook runs
each call of a stainless client (openai, anthropic and their kin) through
:meth:`ClientRetries.request`:

* the client sends one request per try (``max_retries=0``), and where the client would
  have retried — the failures it retries (its own ``_should_retry``: 408, 409, 429, 5xx,
  ``x-should-retry``, a ``Retry-After`` it honours; timeouts, dropped connections), never
  more often than its ``max_retries`` — the governor decides instead: the failed request
  is a failed attempt of the adapter's task, the rules decide (the attempt budget, the
  fleet retry budget and circuit breaker, the backoff honouring ``Retry-After``), and
  after the verdict's backoff the next attempt sends the call again;
* when the governor stops (budget, breaker, fleet budget, kill switch, hand-off), the
  client raises what it raises when its own retries run out (``RateLimitError``…), so the
  framework sees the error it knows; the task is finished, and the adapter records nothing
  more (:attr:`ClientRetries.stopped`). A later call in the same task (a framework loop
  calling again) is not sent: that error is raised again.

What a verdict may change of the next attempt is only what a resend of the client's
request can carry: a fallback for the request's own ``model`` is written into it, any
other change is recorded as the same request resent (:mod:`.resent_verdicts`).

A failure the client would not retry is left to the adapter as before. A client that is
not stainless-generated (a user's own loop around ``httpx``, a library resending by
itself) cannot be told to send once, so its resends are bounded where they go out: a
request to the same method, host and path after a failed one in the same attempt is a
resend, and before it is sent the governor decides (:meth:`ClientRetries.before_send`):
the failed request is a failed attempt, the resend goes as the next one after the
verdict's backoff (less what the client already waited), and when the governor stops
it is not sent — the client gets the provider's failure as a ``ResendRefused`` (a
:class:`~retrylens.sdk.text.sanitizer.Failure`), and so does any later request of the task. With
``RETRYLENS_PROVIDER_RETRIES=client`` the client keeps its retries and they are counted:
a resend is recorded, after it was sent, as a failed attempt and a decision "the client
retried on its own after N ms" (:meth:`ClientRetries.physical`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from retrylens.errors import TaskStopped

from . import resent_verdicts

if TYPE_CHECKING:
    from ...core.run import TaskRun
    from ...core.state import Attempt
    from ...core.verdicts import Verdict
    from .http_attempts import Physical

_CLIENT_RETRIES_ENV = "RETRYLENS_PROVIDER_RETRIES"


def governor_owns_retries() -> bool:
    """Whether the governor decides the client's retries (``RETRYLENS_PROVIDER_RETRIES``)."""
    return os.environ.get(_CLIENT_RETRIES_ENV, "governor").strip().lower() != "client"


class ClientRetries:
    """The attempt in progress of an adapter's task run, advanced by the client's retries."""

    __slots__ = ("run", "attempt", "failed", "last_end", "stopped")

    def __init__(self, run: TaskRun, attempt: Attempt) -> None:
        self.run = run
        self.attempt = attempt
        self.failed: Physical | None = None  # the last request, when it failed
        self.last_end = 0.0
        #: the client's error that ended the task when the governor stopped it, else None
        self.stopped: BaseException | None = None

    def restart(self, attempt: Attempt) -> None:
        """The adapter began ``attempt`` itself (its own retry): nothing is pending."""
        self.attempt, self.failed = attempt, None

    # -- the governor owns the retries of a stainless client's call -------------------------
    def request(
        self, original: Callable[..., Any], client: Any, args: tuple[Any, ...], kwargs: Any
    ) -> Any:
        """``client.request(*args, **kwargs)``, its retries decided by the governor."""
        if self.stopped is not None:
            raise self.stopped  # the task stopped: a later call of it is not sent
        once = _once(client, args)
        if once is None:
            return original(client, *args, **kwargs)
        args, most = once
        for retries in range(most + 1):
            self.failed = None
            sent = _switched(args, self.run)
            try:
                return original(client, *_counted(sent, retries), **kwargs)
            except Exception as error:
                if retries >= most or not _client_retries(client, error):
                    self._seen(error)
                    raise
                verdict = self._decide(error, resent_verdicts.model_of(sent[1]))
                if verdict is None:
                    raise
                last = error
            self.run.wait(verdict)
            self._next(last)
        raise AssertionError("unreachable: the last try returns or raises")  # pragma: no cover

    async def arequest(
        self, original: Callable[..., Any], client: Any, args: tuple[Any, ...], kwargs: Any
    ) -> Any:
        """:meth:`request` for an async client."""
        if self.stopped is not None:
            raise self.stopped
        once = _once(client, args)
        if once is None:
            return await original(client, *args, **kwargs)
        args, most = once
        for retries in range(most + 1):
            self.failed = None
            sent = _switched(args, self.run)
            try:
                return await original(client, *_counted(sent, retries), **kwargs)
            except Exception as error:
                if retries >= most or not _client_retries(client, error):
                    self._seen(error)
                    raise
                verdict = self._decide(error, resent_verdicts.model_of(sent[1]))
                if verdict is None:
                    raise
                last = error
            await self.run.await_backoff(verdict)
            self._next(last)
        raise AssertionError("unreachable: the last try returns or raises")  # pragma: no cover

    def _seen(self, error: BaseException) -> None:
        """The client's error the adapter gets: a user's error raised from it is classified by
        it (:func:`.http_resends.provider_error_behind`), as in a governed attempt."""
        from . import http_resends

        http_resends.note_error(self, error)

    def _decide(self, error: BaseException, model: str | None) -> Verdict | None:
        """Record the failed try and let the rules decide what a resend of its request (asking
        for ``model``) can do; ``None``: the governor stopped."""
        failed = self.failed
        latency = {"latency_ms": failed.latency_ms} if failed is not None else {}
        resent = resent_verdicts.as_resent(self.run.state, model)
        try:
            return self.run.fail(self.attempt, error, as_applied=resent, **latency)
        except TaskStopped:
            self._stop(error)
            return None

    def _next(self, error: BaseException) -> None:
        """Begin the next attempt; when the governor stops before it (a kill switch flipped
        during the backoff, a cancelled chain), ``error`` — the last try's — is raised."""
        try:
            self.attempt = self.run.begin()
            return
        except TaskStopped:
            pass
        self._stop(error)
        raise error  # outside the handler: the error's own cause and context are kept

    def _stop(self, error: BaseException) -> None:
        self.stopped = error
        self.run.finish(self.run.outcome)

    # -- bounding the resends of a plain httpx client --------------------------------------
    def before_send(self, request: Any) -> None:
        """Before ``request`` goes out: a resend of this attempt's failed request is decided by
        the governor first (after the verdict's backoff it goes as the next attempt); when the
        governor stops, or stopped this task before, the provider's failure is raised instead."""
        decided = self._resend(request)
        if decided is not None:
            self.run.wait(decided[0])
            self._next(decided[1])

    async def abefore_send(self, request: Any) -> None:
        """:meth:`before_send` for an async client."""
        decided = self._resend(request)
        if decided is not None:
            await self.run.await_backoff(decided[0])
            self._next(decided[1])

    def _resend(self, request: Any) -> tuple[Verdict, BaseException] | None:
        """The verdict on ``request`` when it resends the failed request (its backoff less what
        the client already waited), and the error that stands for the failure."""
        if self.stopped is not None:
            raise self.stopped  # the task stopped: a later request of it is not sent
        failed = self.failed
        if failed is None or not governor_owns_retries():
            return None
        from ...text.sanitizer import Failure
        from . import http_resends

        if http_resends.endpoint(request) != (failed.method, failed.host, failed.path):
            return None
        self.failed = None
        refused = http_resends.refused(failed, "was not sent (the governor stopped the task)")
        try:
            verdict = self.run.fail(
                self.attempt,
                Failure.of_request(failed),
                as_applied=resent_verdicts.as_resent(self.run.state, None),
                latency_ms=failed.latency_ms,
            )
        except TaskStopped:
            self._stop(refused)
            raise refused from None
        waited_ms = int((time.monotonic() - self.last_end) * 1000)
        return replace(verdict, backoff_ms=max(0, verdict.backoff_ms - waited_ms)), refused

    # -- counting the retries a client keeps -------------------------------------------------
    def physical(self, request: Physical) -> None:
        """One request the provider hook saw inside this attempt."""
        now = time.monotonic()
        failed = self.failed
        if failed is not None and (failed.method, failed.host, failed.path) == (
            request.method,
            request.host,
            request.path,
        ):
            self._retried(
                failed, max(0, int((now - request.latency_ms / 1000 - self.last_end) * 1000))
            )
        self.failed = request if request.failed else None
        self.last_end = now

    def _retried(self, failed: Physical, waited_ms: int) -> None:
        from retrylens.schemas.taxonomy import Decision

        from ...core.verdicts import Verdict
        from ...text.sanitizer import Failure

        self.run.record_failure(
            self.attempt, Failure.of_request(failed), latency_ms=failed.latency_ms
        )
        decision = Decision.RETRY_BACKOFF if waited_ms else Decision.RETRY_SAME
        reason = f"the client retried on its own after {waited_ms} ms ({failed.host})"
        self.run.record_decision(self.attempt, Verdict(decision, reason, backoff_ms=waited_ms))
        self.attempt = self.run.begin()


def _once(client: Any, args: tuple[Any, ...]) -> tuple[tuple[Any, ...], int] | None:
    """``request(cast_to, options, …)``'s arguments with ``max_retries=0``, and the retries the
    client would have made; ``None`` when the client keeps its retries (opted out, or options
    of a shape we do not know)."""
    if len(args) < 2 or not governor_owns_retries():
        return None
    try:
        options = args[1]
        most = int(options.get_max_retries(client.max_retries))
        once = options.model_copy(update={"max_retries": 0})
    except Exception:  # noqa: BLE001 - not the stainless options we know: the client's way
        return None
    return (args[0], once, *args[2:]), most


def _switched(args: tuple[Any, ...], run: TaskRun) -> tuple[Any, ...]:
    """The arguments of the next try: asking for the fallback model the task switched to."""
    return (args[0], resent_verdicts.switched_model(args[1], run.state), *args[2:])


def _counted(args: tuple[Any, ...], retries: int) -> tuple[Any, ...]:
    """The arguments of the ``retries``-th retry: the request says so in the header a stainless
    client sends (``x-stainless-retry-count``), as the client's own retry would."""
    if not retries:
        return args
    options = args[1]
    headers = options.headers if isinstance(options.headers, dict) else {}
    counted = {**headers, "x-stainless-retry-count": str(retries)}
    return (args[0], options.model_copy(update={"headers": counted}), *args[2:])


def _client_retries(client: Any, error: BaseException) -> bool:
    """Whether the stainless ``client`` would have retried the try that raised ``error``."""
    names = {cls.__name__ for cls in type(error).__mro__}
    if "APIStatusError" in names:
        try:
            return bool(client._should_retry(error.response))  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - a client without the method: it would not retry
            return False
    return "APIConnectionError" in names  # timeouts included (a subclass): the client retries
