"""One attempt as a context manager: ``for attempt in run.attempts(): with attempt: ...``.

Its ending is a turn of the attempt loop (:meth:`AttemptScope.ending`), driven by the sync
driver in ``with`` and by the asyncio driver in ``async with``: the same decision either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..text.sanitizer import Failure
from .drivers import adrive, drive
from .loop import Loop

if TYPE_CHECKING:
    from .loop import TaskRun
    from .state import Attempt
    from .verdicts import Verdict


class AttemptScope:
    """One attempt of :meth:`TaskRun.attempts`: a context manager that records its ending."""

    __slots__ = ("run", "attempt", "result", "done")

    def __init__(self, run: TaskRun, attempt: Attempt) -> None:
        self.run, self.attempt, self.result, self.done = run, attempt, None, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.attempt, name)  # messages, number, scope, report(), ...

    def __enter__(self) -> AttemptScope:
        return self

    def ending(self, exc: BaseException | None) -> Loop:
        """How the attempt ended, as a turn of the loop: the verdict to wait out before the
        next attempt, or ``None`` when the loop ends (a success, or ``exc`` is not the
        governor's to decide). Raises :class:`TaskStopped` when the rules stop the task.
        """
        run = self.run
        attempt = run.last_attempt or self.attempt  # steps may have moved on in place
        if exc is None:
            try:
                run.succeed(attempt, self.result)
            except Failure as rejected:  # the success check said no: a failed attempt
                return (yield from run.failing(attempt, rejected))
            self.done = True
            return None
        if not run.decides(exc):
            return None
        return (yield from run.failing(attempt, exc))

    def end(self, exc: BaseException | None) -> Verdict | None:
        return drive(self.ending(exc), self.run.g)  # type: ignore[arg-type,no-any-return]

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        verdict = self.end(exc)
        if verdict is None:
            return False
        self.run.wait(verdict)
        return True

    async def __aenter__(self) -> AttemptScope:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        """The asyncio form: the same turn, driven by the asyncio driver."""
        verdict = await adrive(self.ending(exc), self.run.g)  # type: ignore[arg-type]
        if verdict is None:
            return False
        await self.run.await_backoff(verdict)
        return True
