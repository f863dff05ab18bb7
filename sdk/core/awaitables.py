"""An awaitable where a value was due: a usage error, refused loudly and never recorded.

A plain ``governor.call`` (or a plain step, tool or decorator) runs its function in this
thread; if that function is ``async def``, or returns a coroutine, nothing of it has run
yet: the charge was not made, the answer not computed. Recording that as a success would
be a silent lie, and retrying it would not help, so the awaitable is closed (no "never
awaited" warning on top) and :class:`~retrylens.errors.AsyncToolInPlainCall` names the
async entry point to use instead.
"""

from __future__ import annotations

from typing import Any, NoReturn

from retrylens.errors import AsyncToolInPlainCall


def is_awaitable(value: Any) -> bool:
    """Whether ``value`` can be awaited: decided once per type (every governed call's result
    passes here, and a missing attribute's lookup costs an exception each time)."""
    kind = type(value)
    known = _BY_TYPE.get(kind)
    if known is None:
        if len(_BY_TYPE) >= _MAX_TYPES:
            _BY_TYPE.clear()
        known = _BY_TYPE[kind] = hasattr(kind, "__await__")
    return known


_BY_TYPE: dict[type, bool] = {}
_MAX_TYPES = 1_024


def refuse(value: Any, where: str) -> NoReturn:
    """Close ``value`` and raise the usage error for ``where`` (what returned it)."""
    close = getattr(value, "close", None)
    if close is not None:
        close()  # never awaited: no "coroutine was never awaited" warning on top
    raise AsyncToolInPlainCall(
        f"{where} returned an awaitable inside a plain call, so nothing of it ran: use "
        "`await governor.acall(...)` for an async task and `await governor.astep(...)` "
        "for async tools (an `async def` decorated tool must be awaited)"
    )
