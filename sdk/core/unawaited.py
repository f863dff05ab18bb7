"""A coroutine created and dropped without being awaited inside a governed attempt.

``charge(10)`` where ``await charge(10)`` was meant builds a coroutine and throws it away:
nothing of it ran (the charge was not made), yet the function returns normally, and
Python only says so in a ``RuntimeWarning`` when the coroutine is collected. Recording
that attempt as a success would be a silent lie, so the governor takes the warning:

* :func:`install` routes CPython's "coroutine ... was never awaited" (it calls
  ``warnings._warn_unawaited_coroutine`` for every coroutine collected unstarted) through
  :func:`_collected`, which notes the coroutine's name on the governed attempt in progress
  (:data:`.attempt_scope.current`; a fast first try becomes a task run for it) and then
  warns exactly as Python does, pointing at the user's line;
* the attempt's success is refused (:func:`refuse_success`, called where a task or step
  success is recorded): :class:`~retrylens.errors.CoroutineNeverAwaited` names the dropped
  coroutines, the task is recorded failed and not retried (retrying cannot help).

What it sees: a coroutine whose last reference goes while the attempt runs (an expression
statement, a local of a function that returns). A coroutine kept in a structure that
outlives the attempt, or freed later by the cycle collector, is Python's warning only.
"""

from __future__ import annotations

import _thread
import warnings
from typing import Any

from retrylens.errors import CoroutineNeverAwaited

from . import attempt_scope

_lock = _thread.allocate_lock()
_original: Any = None  # the warnings module's function we replaced


def install() -> None:
    """Take the never-awaited warning (idempotent; process-wide, as Python's hook is)."""
    global _original
    with _lock:
        hook = getattr(warnings, "_warn_unawaited_coroutine", None)
        if hook is None or hook is _collected:
            return  # an interpreter without the hook: Python's warning only
        _original = hook
        warnings._warn_unawaited_coroutine = _collected  # type: ignore[attr-defined]


def uninstall() -> None:
    """Give the warning back to Python."""
    global _original
    with _lock:
        if _original is not None and warnings._warn_unawaited_coroutine is _collected:  # type: ignore[attr-defined]
            warnings._warn_unawaited_coroutine = _original  # type: ignore[attr-defined]
        _original = None


def _collected(coro: Any) -> None:
    """Called by CPython as an unstarted coroutine is collected (never raise from here)."""
    try:
        scope = attempt_scope.current.get()
        if scope is not None:
            materialize = getattr(scope, "materialize", None)  # a fast first try
            run = materialize()[0] if materialize is not None else scope
            run.unawaited.append(getattr(coro, "__qualname__", repr(coro)))
    except Exception:  # noqa: BLE001, S110 - a finalizer: Python's warning still follows
        pass
    _warn(coro)


def _warn(coro: Any) -> None:
    """Python's own warning (``warnings._warn_unawaited_coroutine``'s words), issued from
    here, one level further up, so that the warning still names the user's line."""
    lines = [f"coroutine '{coro.__qualname__}' was never awaited\n"]
    origin = getattr(coro, "cr_origin", None)
    if origin is not None:
        import linecache
        import traceback

        frames = [
            (filename, lineno, name, linecache.getline(filename, lineno))
            for filename, lineno, name in reversed(origin)
        ]
        lines.append("Coroutine created at (most recent call last)\n")
        lines += traceback.format_list(frames)
    warnings.warn("".join(lines).rstrip("\n"), RuntimeWarning, stacklevel=3, source=coro)


def refuse_success(unawaited: list[str], where: str) -> None:
    """Raise :class:`CoroutineNeverAwaited` if the attempt dropped coroutines (``where``:
    what was about to be recorded as a success)."""
    if not unawaited:
        return
    names = tuple(dict.fromkeys(unawaited))
    unawaited.clear()
    listed = ", ".join(f"'{name}'" for name in names)
    raise CoroutineNeverAwaited(
        f"{where} created the coroutine {listed} and dropped it without awaiting it, so "
        "nothing of it ran: the attempt is not recorded as a success. Await it "
        "(`await charge(...)` inside `async def`, run with `await governor.acall(...)`), "
        "or schedule it with `asyncio.create_task(...)` and keep the task",
        coroutines=names,
    )
