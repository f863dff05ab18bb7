"""The two drivers of the attempt loop: they perform what :mod:`~retrylens.sdk.core.loop` asks.

:func:`drive` (plain calls) and :func:`adrive` (asyncio) are the only places that run a
function, sleep, touch the key store or call a user's hook; neither decides anything.
:func:`call` and :func:`acall` are ``Governor.call``/``acall``: a *fast first try* (no
task state until it is needed, one compact event on success; see
:mod:`~retrylens.sdk.core.first_try`) is this module's detail — a failure hands its error to
the same loop as any other attempt's.

User hooks (verify, rollback, hand-off channel) may be ``async def``: ``adrive`` awaits
them within ``Governor.hook_timeout_s``; ``drive`` runs a coroutine to completion on a
private event loop (it never truth-tests one). A blocking channel runs off the event loop.
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from retrylens.errors import AsyncToolInPlainCall

from .awaitables import is_awaitable, refuse
from .loop import GET, PUT, RUN, SLEEP, TOOL, Hook, Loop, current, task
from .side_effects import MemoryKeyStore

if TYPE_CHECKING:
    from .side_effects import KeyStore

T = TypeVar("T")


class Host(Protocol):
    """What the drivers use of the governor (``Governor`` is one; no import of it here)."""

    key_store: KeyStore
    hook_timeout_s: float
    bound_sync_hooks: bool
    sleep: Callable[[float], object]
    asleep: Callable[[float], Awaitable[object]]
    preflight: Any
    chains: Any

    def _first_try(self, *opening: Any) -> Any: ...
    def _open(self, goal: str, **opening: Any) -> Any: ...


Governor = Host


def drive(loop: Loop, g: Governor) -> Any:
    """Perform the loop's operations in this thread until it returns (or raises)."""
    send, value = loop.send, None
    store = g.key_store
    while True:
        try:
            op, arg = send(value)
        except StopIteration as stop:
            return stop.value
        finally:
            value = None  # a tool's exception holds this frame: no cycle for the GC
        try:
            if op is RUN:
                value = arg()
            elif op is TOOL:
                value = arg()
                if is_awaitable(value):
                    refuse(value, "a step or side effect")
            elif op is SLEEP:
                value = g.sleep(arg)
            elif op is GET:
                value = store.get(arg)
            elif op is PUT:
                value = store.put(arg)
            else:
                value = _hook(arg, g)
        except AsyncToolInPlainCall:
            loop.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the loop, which decides
            send, value = loop.throw, exc
        else:
            send = loop.send


async def adrive(loop: Loop, g: Governor) -> Any:
    """Perform the loop's operations on the event loop: awaits, never blocks it."""
    import asyncio

    store = g.key_store
    io = _inline if type(store) is MemoryKeyStore else asyncio.to_thread
    send, value = loop.send, None
    while True:
        try:
            op, arg = send(value)
        except StopIteration as stop:
            return stop.value
        finally:
            value = None  # a tool's exception holds this frame: no cycle for the GC
        try:
            if op is RUN or op is TOOL:
                value = arg()
                if inspect.isawaitable(value):
                    value = await value
            elif op is SLEEP:
                value = await g.asleep(arg)
            elif op is GET:
                value = await io(store.get, arg)
            elif op is PUT:
                value = await io(store.put, arg)
            else:
                value = await _ahook(arg, g)
        except BaseException as exc:  # noqa: BLE001 - handed to the loop, which decides
            send, value = loop.throw, exc
        else:
            send = loop.send


def call(
    g: Governor,
    fn: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    goal: str,
    agent: Any,
    phase: str,
    dependency: str,
    task_id: str | None,
    wants_attempt: bool,
) -> T:
    """``Governor.call``: a fast first try, then (only if it failed) the loop, driven here."""
    first = g._first_try(goal, agent, phase, dependency, task_id, wants_attempt)
    if first is None:
        run = g._open(
            goal, agent=agent, phase=phase, dependency=dependency, task_id=task_id, compact=True
        )
        with run:
            return drive(task(run, fn, args, kwargs, wants_attempt), g)  # type: ignore[no-any-return]
    token = current.set(first)
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - handed to the loop below
        error = exc
    else:
        if is_awaitable(result):  # an async task in a plain call: refused, recorded failed
            with first.materialize()[0]:
                refuse(result, "the governed function")
        first.succeed(result)
        return result
    finally:
        current.reset(token)
    run, _ = first.materialize()
    with run:
        loop = task(run, fn, args, kwargs, wants_attempt, error)
        del error  # its traceback holds this frame: leave no cycle for the GC to find
        return drive(loop, g)  # type: ignore[no-any-return]


async def acall(
    g: Governor,
    fn: Callable[..., Awaitable[T]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    goal: str,
    agent: Any,
    phase: str,
    dependency: str,
    task_id: str | None,
    wants_attempt: bool,
    parent: Any = None,
) -> T:
    """``Governor.acall``: the same as :func:`call`, awaited; ``cancel_chain`` cancels it."""
    import asyncio

    first = (
        None
        if parent is not None
        else g._first_try(goal, agent, phase, dependency, task_id, wants_attempt)
    )
    if first is None:
        opening = {
            "agent": agent,
            "phase": phase,
            "dependency": dependency,
            "task_id": task_id,
            "parent": parent,
            "compact": True,
        }
        if g.preflight is not None:  # a pre-flight check is an HTTP call: off the event loop
            run = await asyncio.to_thread(lambda: g._open(goal, **opening))
        else:
            run = g._open(goal, **opening)
        g.chains.attach_current_task(run.state.task_id)
        with run:
            return await adrive(task(run, fn, args, kwargs, wants_attempt), g)  # type: ignore[no-any-return]
    if task_id is not None:
        g.chains.attach_current_task(task_id)
    token = current.set(first)
    try:
        result = await fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - handed to the loop below
        error = exc
    else:
        first.succeed(result)
        return result
    finally:
        current.reset(token)
    run, _ = first.materialize()
    if task_id is None:
        g.chains.attach_current_task(run.state.task_id)
    with run:
        loop = task(run, fn, args, kwargs, wants_attempt, error)
        del error  # no frame ↔ traceback cycle
        return await adrive(loop, g)  # type: ignore[no-any-return]


# -- hooks: a user's verify / rollback / channel -----------------------------------------
def _hook(hook: Hook, g: Governor) -> Any:
    """Call a hook in this thread; a coroutine it returns is run to completion, bounded."""
    if hook.what == "channel":
        if _blocking(hook) and _on_event_loop():
            _in_thread(hook, g.hook_timeout_s)  # sync code on an event loop: never block it
            return None
        return _bounded(hook, g.hook_timeout_s)  # a hanging channel must not hold the outcome
    if g.bound_sync_hooks:
        return _bounded(hook, g.hook_timeout_s)  # asked for: a hanging verify/rollback too
    value = hook.fn(*hook.args, **hook.kwargs)
    if inspect.isawaitable(value):
        return _run_coroutine(value, g.hook_timeout_s)
    return value


async def _ahook(hook: Hook, g: Governor) -> Any:
    """Call a hook from the event loop: awaited within the timeout, blocking channels in a thread."""
    import asyncio

    in_thread = _blocking(hook) if hook.what == "channel" else g.bound_sync_hooks
    if in_thread and not inspect.iscoroutinefunction(hook.fn):
        pending: Any = _in_daemon_thread(hook)
    else:
        pending = hook.fn(*hook.args, **hook.kwargs)
        if not inspect.isawaitable(pending):
            return pending
    try:
        value = await asyncio.wait_for(pending, g.hook_timeout_s)
    except TimeoutError:
        raise TimeoutError(f"{hook.what} did not answer within {g.hook_timeout_s:g} s") from None
    if in_thread and inspect.isawaitable(value):  # a sync function returned an awaitable
        return await asyncio.wait_for(value, g.hook_timeout_s)
    return value


def _in_daemon_thread(hook: Hook) -> Any:
    """A future of ``hook`` run in a daemon thread. Not ``asyncio.to_thread``: a hook that
    hangs past the timeout would then hold ``asyncio.run``'s exit, which joins the executor."""
    import asyncio

    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # timed out and cancelled meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def run() -> None:
        try:
            value, error = hook.fn(*hook.args, **hook.kwargs), None
        except BaseException as exc:  # noqa: BLE001 - re-raised in the awaiting task
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop has closed: nobody waits any more
            return

    threading.Thread(target=run, name=f"retrylens-{hook.what}", daemon=True).start()
    return future


def _run_coroutine(awaitable: Any, timeout_s: float) -> Any:
    """Run ``awaitable`` on a private event loop (in a worker thread if this one has a loop)."""
    import asyncio

    async def bounded() -> Any:
        return await asyncio.wait_for(awaitable, timeout_s)

    if not _on_event_loop():
        return asyncio.run(bounded())
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = asyncio.run(bounded())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="retrylens-hook", daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _blocking(hook: Hook) -> bool:
    """Whether a channel says it may block (a webhook, a file); unknown channels may."""
    return bool(getattr(getattr(hook.fn, "__self__", None), "blocking", True))


def _bounded(hook: Hook, timeout_s: float) -> Any:
    """Run a hand-off channel in a worker thread and wait at most ``timeout_s`` for it.

    Channels, and a sync verify or rollback when ``Governor(bound_sync_hooks=True)``; by
    default those run inline (they may use thread-bound resources such as a SQLite
    connection), so they must bound their own calls.
    """
    box: dict[str, Any] = {}

    def send() -> None:
        try:
            value = hook.fn(*hook.args, **hook.kwargs)
            box["value"] = _run_coroutine(value, timeout_s) if inspect.isawaitable(value) else value
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=send, name="retrylens-handoff", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise TimeoutError(f"{hook.what} did not answer within {timeout_s:g} s")
    if "error" in box:
        raise box.pop("error")
    return box.get("value")


def _in_thread(hook: Hook, timeout_s: float) -> None:
    import logging

    def send() -> None:
        try:
            value = hook.fn(*hook.args, **hook.kwargs)
            if inspect.isawaitable(value):
                _run_coroutine(value, timeout_s)
        except Exception:  # noqa: BLE001 - the event already records the hand-off
            logging.getLogger(__name__).exception("hand-off channel failed")

    threading.Thread(target=send, name="retrylens-handoff", daemon=True).start()


async def _inline(fn: Callable[..., T], /, *args: Any) -> T:
    return fn(*args)


def _on_event_loop() -> bool:
    asyncio: Any = sys.modules.get("asyncio")
    if asyncio is None:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
