"""The side-effect protocol, sans I/O: at most once per key, and never repeated blindly.

A generator per guarded call (see :mod:`~retrylens.sdk.core.loop` for the operations): read the
key, skip a committed effect, ask ``verify`` whether an earlier try happened, record the
intent, run the tool, record the result. After an *ambiguous* failure — one that may have
happened after the request reached the other side (a read timeout, a reset, a broken pipe,
a server that hung up, a cancellation in flight: :mod:`.ambiguity` reads where, not what
type) — the tool's contract decides:

* it takes an ``idempotency_key`` parameter: repeated with the same key (the provider
  dedupes);
* ``verify=``: asked whether it happened (an ``async def`` verify is awaited);
* ``repeat_on_timeout=True``: the tool says it is harmless twice, so it is repeated;
* ``rollback=``: undone (before the next attempt), then repeated;
* ``unsafe=True`` — or no contract at all (the safe default) — the task stops for a
  person (or gives up without a hand-off channel), with a reason naming the fixes.

A verify that raises or does not answer leaves the outcome unknown: the task stops the
same way, and the reason says what the verify did.

A cancellation (``CancelledError``: a deadline's ``wait_for``/``timeout``, or anyone's
``task.cancel()``) is never swallowed: the effect is recorded failed and, without a
contract, ambiguous, and the cancellation goes on at once (no verify runs in a cancelled
task). A deadline turns it into ``TimeoutError`` on its way out, which the loop decides:
the ambiguity stops the task. Any other cancellation ends the call as cancelled. A tool
with ``verify`` is asked on the next try, before it runs again. Rollbacks are owed "failure debt",
paid (``HOOK``) before the next attempt.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from retrylens.errors import SideEffectError
from retrylens.schemas.taxonomy import SideEffectStatus

from .ambiguity import may_have_reached
from .loop import GET, HOOK, PUT, TOOL, Hook, Loop, TaskRun
from .side_effects import KeyRecord, idempotency_key

log = logging.getLogger(__name__)

FIXES = (
    "give it verify=, an idempotency_key parameter, repeat_on_timeout=True if it is harmless "
    "twice, or unsafe=True to always ask a person"
)


def has_contract(
    fn: Callable[..., object],
    *,
    verify: object = None,
    unsafe: bool = False,
    repeat_on_timeout: bool = False,
    rollback: object = None,
) -> bool:
    """Whether a side-effecting tool says what to do after an ambiguous failure (a rollback
    does: it is undone, then repeated)."""
    return (
        verify is not None
        or rollback is not None
        or unsafe
        or repeat_on_timeout
        or accepts(fn, "idempotency_key")
    )


def effect(
    run: TaskRun,
    tool: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    step: str | None = None,
    rollback: Callable[..., object] | None = None,
    key: str | None = None,
    verify: Callable[..., object] | None = None,
    unsafe: bool = False,
    repeat_on_timeout: bool = False,
) -> Loop:
    """One guarded call of ``fn`` (see the module docstring); returns its result."""
    s = run.state
    if run.last_attempt is not None:
        run.last_attempt.tool_call(tool, {"args": args, "kwargs": kwargs})
    key = key or idempotency_key(s.task_id, step or tool, {"args": args, "kwargs": kwargs})
    keyed = accepts(fn, "idempotency_key")
    blind = unsafe or not (repeat_on_timeout or rollback or keyed)  # no way to repeat safely
    record = yield GET, key
    if record is not None:
        if record.status is SideEffectStatus.COMMITTED:
            run._side_effect_event(tool, key, SideEffectStatus.SKIPPED_DUPLICATE)
            return record.result
        if verify is not None and record.status in (
            SideEffectStatus.FAILED,
            SideEffectStatus.INTENDED,
        ):
            happened = yield from _verify(run, tool, verify, args, kwargs, None)
            if happened:
                return (yield from _committed(run, tool, key, happened))
        elif record.status is SideEffectStatus.INTENDED and blind:
            _ambiguous(run, tool, unsafe, "an earlier try began and its outcome was never recorded")
            raise SideEffectError(f"{tool}: an earlier try's outcome is unknown", key=key)
    yield PUT, KeyRecord(key, s.task_id, tool, SideEffectStatus.INTENDED)
    call_kwargs = {**kwargs, "idempotency_key": key} if keyed else kwargs
    try:
        result = yield TOOL, lambda: fn(*args, **call_kwargs)
    except BaseException as exc:
        ambiguous = may_have_reached(exc)
        if ambiguous and verify is not None:
            if isinstance(exc, Exception):  # a cancelled task verifies on its next try
                happened = yield from _verify(run, tool, verify, args, kwargs, exc)
                if happened:
                    return (yield from _committed(run, tool, key, happened))
        if ambiguous and blind and verify is None:
            # the outcome is unknown: it stays "intended" in the store, so a re-run of the
            # task (same id, another process) will not repeat it either
            _ambiguous(run, tool, unsafe, "it may have happened")
        else:
            yield PUT, KeyRecord(key, s.task_id, tool, SideEffectStatus.FAILED)
        run._side_effect_event(tool, key, SideEffectStatus.FAILED, rollback=_name(rollback))
        if rollback is not None:
            run.owe(tool, key, Hook("rollback", rollback, args, kwargs))
        raise
    yield PUT, KeyRecord(key, s.task_id, tool, SideEffectStatus.COMMITTED, result)
    run._side_effect_event(tool, key, SideEffectStatus.COMMITTED)
    if rollback is not None and not s.current_step:
        run.undoable(tool, key, Hook("rollback", rollback, args, kwargs), step or tool)
    return result


def _ambiguous(run: TaskRun, tool: str, unsafe: bool, what: str) -> None:
    """Mark ``tool``'s outcome unknown: the task stops (``stop_on_ambiguous_side_effect``)."""
    s = run.state
    s.ambiguous = tool[:128]
    s.ambiguous_why = (
        f"{what} and is declared unsafe to repeat, so a person checks it"
        if unsafe
        else f"{what} and {tool} declares no way to tell, so it is not repeated blindly: {FIXES}"
    )


def _verify(
    run: TaskRun,
    tool: str,
    verify: Callable[..., object],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    error: BaseException | None,
) -> Loop:
    """What ``verify`` answers (awaited if async); a verify that fails leaves it unknown."""
    try:
        return (yield HOOK, Hook("verify", verify, args, kwargs))
    except Exception as exc:  # noqa: BLE001 - a broken verify must not lose the task
        s = run.state
        s.ambiguous = tool[:128]
        s.ambiguous_why = (
            f"its verify failed ({type(exc).__name__}: {exc}), so whether it happened is "
            "unknown and it is not repeated blindly"
        )
        log.warning("verify of %s failed: %r", tool, exc)
        if error is None:
            raise
        return False


def _committed(run: TaskRun, tool: str, key: str, happened: Any) -> Loop:
    """Record an effect ``verify`` found done; its result is what verify returned (or None)."""
    result = None if happened is True else happened
    yield PUT, KeyRecord(key, run.state.task_id, tool, SideEffectStatus.COMMITTED, result)
    run._side_effect_event(tool, key, SideEffectStatus.COMMITTED)
    return result


def pay_debts(run: TaskRun) -> Loop:
    """Run the rollbacks owed before the next attempt; a failing one is recorded, not fatal."""
    debts = run._debts
    while debts:
        tool, key, undo = debts.pop(0)
        try:
            yield HOOK, undo
        except Exception:  # noqa: BLE001
            log.exception("rollback of %s (%s) failed", tool, key)
            run._side_effect_event(tool, key, SideEffectStatus.FAILED, rollback="failed")
            continue
        yield PUT, KeyRecord(key, run.state.task_id, tool, SideEffectStatus.ROLLED_BACK)
        run._side_effect_event(tool, key, SideEffectStatus.ROLLED_BACK, rollback="done")


def _name(fn: Callable[..., object] | None) -> str | None:
    return getattr(fn, "__name__", "rollback")[:128] if fn is not None else None


def accepts(fn: Callable[..., object], name: str) -> bool:
    """Whether ``fn`` takes a parameter called ``name``."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
