"""The governor's decorators and step calls: how tools and tasks enter the attempt loop.

``@governor.governed`` runs a function as a task, ``governor.step``/``astep`` run one step of
the task in progress, ``@governor.tool`` makes every call of a read-only tool such a step,
``@governor.side_effect`` guards a tool that changes the world (see :mod:`.effects`). They
find the task in progress through :func:`current_run` (a context variable of the loop).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .first_try import FirstTry
from .loop import current as _current_run

if TYPE_CHECKING:
    from retrylens.schemas import AgentRef

    from .run import TaskRun

T = TypeVar("T")


def current_run() -> TaskRun | None:
    """The task run of the governed call in progress (for side-effect decorators).

    Inside a fast-path first attempt this builds the task's run on first use, so the
    call is recorded with the full event sequence from then on.
    """
    value = _current_run.get()
    if isinstance(value, FirstTry):
        return value.materialize()[0]
    return value


class GovernorTools:
    """The decorators of :class:`~retrylens.sdk.core.governor.Governor` (a mixin)."""

    if TYPE_CHECKING:

        def call(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any: ...
        async def acall(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any: ...

    def governed(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        agent: str | AgentRef = "agent",
        phase: str = "execution",
        dependency: str = "",
    ) -> Any:
        """Decorator form of :meth:`call` / :meth:`acall` (picks by ``async def``); works
        bare (``@governor.governed``) and called (``@governor.governed(agent="support")``)."""

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            if inspect.iscoroutinefunction(_callable(fn, "governed")):

                @functools.wraps(fn)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    return await self.acall(
                        fn, *args, agent=agent, phase=phase, dependency=dependency, **kwargs
                    )

                return async_wrapper

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return self.call(
                    fn, *args, agent=agent, phase=phase, dependency=dependency, **kwargs
                )

            return wrapper

        return decorate if fn is None else decorate(fn)

    def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run one step of the governed call in progress, retried in place (see ``TaskRun.step``).

        ``governor.step("lookup", tool.lookup, order_id, dependency="orders")``: a failed
        step is retried alone under the task's budget and rules, not the whole task; a
        re-run task skips the steps it already completed. For an ``async def`` tool it
        returns an awaitable (``await governor.step(...)``, as :meth:`astep`).
        """
        run = _run_for(name, "steps")
        if inspect.iscoroutinefunction(fn):
            return run.astep(name, fn, *args, **kwargs)
        return run.step(name, fn, *args, **kwargs)

    async def astep(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """:meth:`step` inside :meth:`acall`, for any tool whose call gives an awaitable."""
        return await _run_for(name, "steps").astep(name, fn, *args, **kwargs)

    def tool(
        self, name: str | Callable[..., T] | None = None, *, dependency: str | None = None
    ) -> Any:
        """Decorator for a read-only tool: inside a governed call each call is a step,
        retried in place, and a re-run task gets its stored answer instead of calling again.

        Works bare (``@governor.tool``: the step is named after the function) and called
        (``@governor.tool("search")``). Use :meth:`side_effect` for a tool that changes
        the world.
        """
        if callable(name):
            return self.tool(dependency=dependency)(name)

        def decorate(fn: Callable[..., T]) -> Callable[..., T]:
            label = name or getattr(fn, "__qualname__", "tool")
            return _as_step(_callable(fn, "tool"), label, {"dependency": dependency})

        return decorate

    def side_effect(
        self,
        tool: str | Callable[..., T],
        *,
        step: str | None = None,
        rollback: Callable[..., object] | None = None,
        verify: Callable[..., object] | None = None,
        unsafe: bool = False,
        repeat_on_timeout: bool = False,
    ) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator for a side-effecting tool used inside a governed call (see :mod:`.effects`).

        Its contract for an ambiguous failure (one after the request may have reached the
        other side — a read timeout, a reset, a cancellation in flight: did it happen?): a tool taking
        ``idempotency_key`` is repeated with the same key; ``verify(*args, **kwargs)`` (may
        be ``async def``) checks whether it happened instead of repeating it;
        ``repeat_on_timeout=True`` says it is harmless twice; ``unsafe=True`` hands the task
        to a person. With none of these it is never repeated blindly: the task stops for a
        person (or gives up), and decorating it warns once. Written bare
        (``@governor.side_effect``) the tool is named after the function.
        """
        if callable(tool):
            fn = tool
            named = self.side_effect(
                getattr(fn, "__qualname__", "side_effect"),
                step=step,
                rollback=rollback,
                verify=verify,
                unsafe=unsafe,
                repeat_on_timeout=repeat_on_timeout,
            )
            return named(fn)  # type: ignore[return-value]
        options: dict[str, Any] = {
            "rollback": rollback,
            "verify": verify,
            "unsafe": unsafe,
            "repeat_on_timeout": repeat_on_timeout,
            "step": step or tool,
        }

        from .effects import has_contract  # the side-effect machinery loads when first used

        def decorate(fn: Callable[..., T]) -> Callable[..., T]:
            _callable(fn, "side_effect")
            if not has_contract(
                fn,
                verify=verify,
                unsafe=unsafe,
                repeat_on_timeout=repeat_on_timeout,
                rollback=rollback,
            ):
                _warn_no_contract(tool)
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    run = _run_for(tool, "side effects")
                    return await run.aside_effect(tool, fn, *args, **options, **kwargs)

                return async_wrapper  # type: ignore[return-value]

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> T:
                return _run_for(tool, "side effects").side_effect(
                    tool, fn, *args, **options, **kwargs
                )

            return wrapper

        return decorate


def _callable(fn: Any, decorator: str) -> Any:
    """``fn``, if a decorator was given something it can wrap; else a clear error at once."""
    if not callable(fn):
        raise TypeError(
            f"@governor.{decorator} decorates a function; it was given {type(fn).__name__} "
            f"{fn!r} (write @governor.{decorator} or @governor.{decorator}(...) above a def)"
        )
    return fn


def _run_for(name: str, what: str) -> TaskRun:
    run = current_run()
    if run is None:
        raise RuntimeError(f"{name}: {what} must run inside a governed call")
    return run


def _as_step(fn: Callable[..., T], label: str, options: dict[str, Any]) -> Callable[..., T]:
    """``fn`` called as a step of the governed call in progress (as itself outside one)."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_tool(*args: Any, **kwargs: Any) -> Any:
            run = current_run()
            if run is None:
                return await fn(*args, **kwargs)
            return await run.astep(
                run.call_name(label, args, kwargs), fn, *args, **options, **kwargs
            )

        return async_tool  # type: ignore[return-value]

    @functools.wraps(fn)
    def sync_tool(*args: Any, **kwargs: Any) -> T:
        run = current_run()
        if run is None:
            return fn(*args, **kwargs)
        return run.step(run.call_name(label, args, kwargs), fn, *args, **options, **kwargs)

    return sync_tool


_WARNED: set[str] = set()


def _warn_no_contract(tool: str) -> None:
    """Say once per tool that an ambiguous failure will stop its task, and how to fix that."""
    if tool in _WARNED:
        return
    _WARNED.add(tool)
    import warnings

    from .effects import FIXES

    warnings.warn(
        f"side effect {tool!r} declares no contract for an ambiguous failure (a timeout, a "
        f"reset or a cancellation after the request left: it may have happened), so the "
        f"governor will not repeat it and stops the task for a person instead: {FIXES}",
        UserWarning,
        stacklevel=3,
    )
