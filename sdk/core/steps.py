"""Steps and side effects of a task run: the tool-facing half of :class:`~retrylens.sdk.core.run.TaskRun`.

Each public method here is a thin wrapper: it builds one generator of the loop
(:func:`~retrylens.sdk.core.loop.step`, :func:`~retrylens.sdk.core.effects.effect`) and hands it to
the sync or the asyncio driver. There is one body per feature; ``step``/``astep`` and
``side_effect``/``aside_effect`` differ only in which driver performs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from . import loop
from .drivers import adrive, drive
from .effects import effect
from .side_effects import idempotency_key
from .usage import usage_of

if TYPE_CHECKING:
    from .loop import Hook, Loop
    from .state import Attempt, TaskState

T = TypeVar("T")


class RunSteps:
    """The steps and side effects of a :class:`~retrylens.sdk.core.run.TaskRun` (a mixin)."""

    g: Any
    state: TaskState
    last_attempt: Attempt | None
    _debts: list[tuple[str, str, Hook]]
    _undoable: list[tuple[str, str, Hook, str]]
    _calls: dict[str, int]
    unawaited: list[str]

    # -- steps -----------------------------------------------------------------------------
    def step(
        self,
        name: str,
        fn: Callable[..., T],
        /,
        *args: Any,
        phase: str | None = None,
        dependency: str | None = None,
        side_effect: bool = False,
        **kwargs: Any,
    ) -> T:
        """Run one step of the task, retried *in place* under the task's budget and rules.

        A failed step does not re-run the task: the rules decide (class caps count per
        step; the attempt budget, deadline and money are the task's), the governor waits,
        and only this step runs again as the next attempt. A completed step is recorded,
        so a task that is re-run anyway (its own code failed) resumes after its last
        completed step: ``step`` returns the stored output instead of calling ``fn``.
        ``side_effect=True`` (implied by ``verify``/``unsafe``/``rollback``/``key``/
        ``repeat_on_timeout``) guards the call with an idempotency key and that contract
        (see :mod:`~retrylens.sdk.core.effects`). Usage the tool returns counts at once.
        """
        return drive(self._step(name, fn, args, kwargs, phase, dependency, side_effect), self.g)  # type: ignore[no-any-return]

    async def astep(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        phase: str | None = None,
        dependency: str | None = None,
        side_effect: bool = False,
        **kwargs: Any,
    ) -> Any:
        """:meth:`step` for an ``async def`` tool (or one returning an awaitable): awaited,
        and called again for each try, since a coroutine can be awaited once."""
        return await adrive(
            self._step(name, fn, args, kwargs, phase, dependency, side_effect), self.g
        )

    def _step(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        phase: str | None,
        dependency: str | None,
        side_effect: bool,
    ) -> Loop:
        guard = {k: kwargs.pop(k) for k in _CONTRACT if k in kwargs}
        guarded = side_effect or any(v not in (None, False) for v in guard.values())
        return loop.step(
            self,  # type: ignore[arg-type]
            name,
            fn,
            args,
            kwargs,
            phase=phase,
            dependency=dependency,
            guard=guard if guarded else None,
        )

    def step_succeeded(self, name: str, output: Any, dependency: str) -> None:
        """A step's tool answered: its dependency is healthy, its usage charged, its output kept
        (unless it dropped a coroutine unawaited: then it failed, see :mod:`.unawaited`)."""
        if self.unawaited and self.last_attempt is not None:
            self._refuse_unawaited(self.last_attempt, f"step {name!r}")  # type: ignore[attr-defined]
        if dependency:
            self.observe(dependency, True)  # type: ignore[attr-defined]
        attempt = self.last_attempt
        usage = usage_of(output) if attempt is not None and type(output) not in _PLAIN else None
        if usage is not None and attempt is not None:
            attempt.report(usage)  # on the attempt's event, and charged now: budgets see it
            total = attempt.usage
            self._charge(attempt, total.tokens, total.cost_usd)  # type: ignore[attr-defined,union-attr]
        self.complete_step(name, output)

    def complete_step(self, name: str, output: Any = None, *, fact: str | None = None) -> None:
        """Record a verified sub-step; later attempts skip it and carry ``fact``.

        A step completed for the first time earns the task its per-step retries.
        """
        if name not in self.state.completed_steps:
            self.state.ledger.complete_step()
        self.state.completed_steps[name] = output
        if fact:
            self.state.context.add_fact(fact)

    def step_done(self, name: str) -> bool:
        return name in self.state.completed_steps

    def call_name(self, label: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The step name of this call of tool ``label``: its arguments' digest, numbered when
        the same call repeats within one pass of the task (a re-run pass counts afresh)."""
        name = idempotency_key("", label, {"args": args, "kwargs": kwargs})
        seen = self._calls.get(name, 0) + 1
        self._calls[name] = seen
        return name if seen == 1 else f"{name}#{seen}"

    # -- side effects ----------------------------------------------------------------------
    def side_effect(self, tool: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run a side-effecting call at most once per key (see :mod:`~retrylens.sdk.core.effects`).

        Its contract for an ambiguous failure (after the request may have reached the other
        side: the effect may have happened; see :mod:`~retrylens.sdk.core.ambiguity`),
        given as keywords: ``verify``, ``unsafe``, ``repeat_on_timeout``, ``rollback``,
        ``key``, ``step``; or an ``idempotency_key`` parameter of ``fn``.
        """
        return drive(self.effect(tool, fn, args, *_split(kwargs)), self.g)  # type: ignore[no-any-return]

    async def aside_effect(
        self, tool: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Any:
        """:meth:`side_effect` for an ``async def`` tool: awaited before anything is committed;
        key-store I/O runs in a worker thread so a SQLite or ClickHouse store never blocks."""
        return await adrive(self.effect(tool, fn, args, *_split(kwargs)), self.g)

    def effect(
        self,
        tool: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        contract: dict[str, Any] | None = None,
        **guard: Any,
    ) -> Loop:
        """The side-effect protocol for one call, as a generator of the loop."""
        return effect(self, tool, fn, args, kwargs, **(contract or {}), **guard)  # type: ignore[arg-type]

    def owe(self, tool: str, key: str, undo: Hook) -> None:
        """A failed effect's rollback, paid before the next attempt."""
        self._debts.append((tool, key, undo))

    def undoable(self, tool: str, key: str, undo: Hook, step: str) -> None:
        """A committed effect's rollback, owed if its attempt then fails as a whole."""
        self._undoable.append((tool, key, undo, step))


_CONTRACT = ("verify", "unsafe", "rollback", "key", "repeat_on_timeout")
_PLAIN = (str, int, float, bool, type(None), bytes)


def _split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tool's own keywords, and the contract keywords meant for the governor."""
    contract = {k: kwargs.pop(k) for k in (*_CONTRACT, "step") if k in kwargs}
    return kwargs, contract
