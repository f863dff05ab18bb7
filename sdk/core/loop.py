"""The attempt loop, sans I/O: generators that say what to do next and never do it.

As tenacity's ``BaseRetrying.iter`` returns ``DoAttempt``/``DoSleep`` for ``Retrying`` and
``AsyncRetrying`` to perform, and h11's ``Connection`` leaves every socket to its caller,
the governed task is a generator that *yields operations* and gets their outcome back
(sent in, or the exception thrown in):

==========================  ============================================================
``(RUN, thunk)``            run the task's function (its awaitable awaited by acall)
``(TOOL, thunk)``           run a step's or side effect's tool (the same; a plain call
                            refuses an awaitable: async tools need ``astep``/``acall``)
``(SLEEP, seconds)``        wait out a backoff
``(GET, key)``              read the idempotency-key store
``(PUT, record)``           write it
``(HOOK, Hook(...))``       call a user's verify / rollback / hand-off channel, which may
                            be ``async def`` (awaited, never truth-tested) and may raise
==========================  ============================================================

:mod:`~retrylens.sdk.core.drivers` holds the two drivers, a dozen lines each; everything that
decides — budgets, the kill switch, the breaker, shadow, pre-flight review, steps, side
effects, hand-off — lives here and in the :class:`~retrylens.sdk.core.run.TaskRun` it drives,
once. Events are this machine's output, built as it goes and handed to the emitter's
queue (non-blocking), as h11 returns bytes to send.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from .attempt_scope import (
    current,  # the governed call in progress: steps, decorators and the provider hook read it
)

if TYPE_CHECKING:
    from .state import Attempt

RUN, TOOL, SLEEP, GET, PUT, HOOK = "run", "tool", "sleep", "get", "put", "hook"
Op = tuple[str, Any]
Loop = Generator[Op, Any, Any]
#: A :class:`~retrylens.sdk.core.run.TaskRun`, typed loosely: this module sits below it.
TaskRun = Any


class Hook:
    """A user's callable the loop needs the outcome of: ``what`` names it in reasons and logs."""

    __slots__ = ("what", "fn", "args", "kwargs")

    def __init__(
        self, what: str, fn: Callable[..., Any], args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> None:
        self.what, self.fn, self.args, self.kwargs = what, fn, args, kwargs or {}

    def __repr__(self) -> str:
        return f"<Hook {self.what} {getattr(self.fn, '__qualname__', self.fn)!r}>"


def around_attempt(run: TaskRun, attempt: Attempt) -> AbstractContextManager[object]:
    """What wraps the execution of one attempt (or step try): a seam for per-attempt scopes,
    such as a provider-client retry hook that must know the attempt it runs in."""
    return _NO_SCOPE


_NO_SCOPE = nullcontext()


def task(
    run: TaskRun,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    wants_attempt: bool,
    first_error: BaseException | None = None,
) -> Loop:
    """The task's attempts until one succeeds or the rules stop it; returns the result.

    ``first_error`` is how a fast first try (run by the driver before any state existed)
    ended: it is decided here like any other failed attempt.
    """
    if first_error is not None:
        attempt = run.last_attempt
        try:
            if not run.decides(first_error):
                raise first_error
            verdict = yield from run.failing(attempt, first_error)  # type: ignore[arg-type]
        finally:
            del first_error  # its traceback holds the caller's frame: no cycle for the GC
        if verdict.backoff_ms:
            yield SLEEP, verdict.backoff_ms / 1000
    while True:
        attempt = yield from run.beginning()
        run._calls.clear()  # a new pass of the task: its tool calls are numbered afresh
        token = current.set(run)
        try:
            with around_attempt(run, attempt):
                call_kwargs = {**kwargs, "attempt": attempt} if wants_attempt else kwargs
                result = yield RUN, lambda: fn(*args, **call_kwargs)  # noqa: B023 - run at once
            run.succeed(run.last_attempt or attempt, result)
        except BaseException as exc:
            if not run.decides(exc):
                raise
            verdict = yield from run.failing(run.last_attempt or attempt, exc)
            if verdict.backoff_ms:
                yield SLEEP, verdict.backoff_ms / 1000
            continue
        finally:
            current.reset(token)
        return result


def step(
    run: TaskRun,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    phase: str | None,
    dependency: str | None,
    guard: dict[str, Any] | None,
) -> Loop:
    """One step of the task, retried *in place*: only this step runs again after a failure.

    ``guard`` (the side-effect contract: ``verify``/``unsafe``/``rollback``/...) runs the
    tool through the side-effect protocol; ``None`` runs it as a read-only step.
    """
    s = run.state
    if name in s.completed_steps:
        return s.completed_steps[name]
    attempt = run.last_attempt or (yield from run.beginning(phase=phase, dependency=dependency))
    entered = attempt
    s.backoff_from = s.retries  # this step's retries back off from the base
    outer_step, outer_phase, outer_dep = s.current_step, s.phase, s.dependency
    s.current_step = name
    try:
        while True:
            where = {
                "phase": phase or attempt.phase,
                "dependency": dependency or attempt.dependency,
            }
            try:
                with around_attempt(run, attempt):
                    if guard is not None:
                        result = yield from run.effect(name, fn, args, kwargs, step=name, **guard)
                    else:
                        result = yield TOOL, lambda: fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - every failure is classified
                if not run.decides(exc):
                    raise
                verdict = yield from run.failing(attempt, exc, **where)
                if verdict.backoff_ms:
                    yield SLEEP, verdict.backoff_ms / 1000
                attempt = yield from run.beginning(**where)
                continue
            run.step_succeeded(name, result, where["dependency"])
            return result
    finally:
        s.current_step = outer_step
        if run.outcome is None:
            s.phase, s.dependency = outer_phase, outer_dep
            if attempt is not entered:  # a retry of this step began it; the task goes on in it
                attempt.phase, attempt.dependency = outer_phase, outer_dep
