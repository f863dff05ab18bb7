"""How a task stops: give up, cancel the chain, or hand it to a person — sans I/O.

:func:`stop` is a generator of the loop (see :mod:`~retrylens.sdk.core.loop`): a hand-off builds
the package, asks the driver to deliver it (``HOOK``; the channel may be ``async def``,
may raise, may hang — the driver bounds it), records the ``handoff`` event with what the
channel did, and then raises the :class:`~retrylens.errors.TaskStopped` that ends the task.
Whatever the channel does, the task's outcome is recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrylens.errors import ChainCancelled, GaveUp, HandedOff
from retrylens.schemas.limits import MAX_REASON_CHARS
from retrylens.schemas.taxonomy import Decision, EventKind, TaskOutcome

from ..transport.handoff import HandoffPackage
from .loop import HOOK, Hook, Loop, TaskRun
from .run_events import package_snapshot

if TYPE_CHECKING:
    from .verdicts import Verdict


def stop(run: TaskRun, verdict: Verdict, error: BaseException | None) -> Loop:
    """End the task as ``verdict`` says; never returns (raises the matching TaskStopped)."""
    s = run.state
    if verdict.decision is Decision.HANDOFF_HUMAN:
        run.outcome = TaskOutcome.HANDED_OFF
        yield from hand_off(run, verdict)
        raise HandedOff(s.task_id, verdict, error)
    if verdict.decision is Decision.CANCEL_CHAIN:
        run.outcome = TaskOutcome.CANCELLED
        run.g.cancel_chain(s.task_id)
        raise ChainCancelled(s.task_id, verdict, error)
    run.outcome = TaskOutcome.FAILED
    raise GaveUp(s.task_id, verdict, error)


def hand_off(run: TaskRun, verdict: Verdict) -> Loop:
    """Deliver the package through the governor's channel and record the ``handoff`` event."""
    package = build_package(run, verdict)
    reason = verdict.reason
    channel = run.g.handoff_channel
    if channel is not None:
        try:
            yield HOOK, Hook("channel", channel.send, (package,))
        except Exception as exc:  # noqa: BLE001 - a failed delivery is recorded, the task stops
            reason = f"{reason} (channel failed: {exc})"
    last = run.state.last_failure
    run._event(
        EventKind.HANDOFF,
        decision=Decision.HANDOFF_HUMAN,
        decision_reason=reason[:MAX_REASON_CHARS],
        error_detail=last.detail() if last is not None else None,
        context_snapshot=package_snapshot(package.to_dict()),
    )


def build_package(run: TaskRun, verdict: Verdict) -> HandoffPackage:
    """What a person needs to pick the task up (redacted when it is serialized)."""
    s = run.state
    last = s.last_failure
    output = last.output if last is not None and last.output is not None else None
    package = HandoffPackage(
        project=s.project,
        agent=s.agent.name,
        task_id=s.task_id,
        reason=verdict.reason,
        inputs=s.goal,
        context=run.last_attempt.messages if run.last_attempt else [],
        outputs=dict(s.completed_steps),
        errors=[
            {
                "attempt": f.attempt,
                "phase": f.phase,
                "error_type": f.error_type.value,
                "summary": f.summary,
            }
            for f in s.failures
        ],
        attempts=s.attempt,
        policy=f"{s.policy.id}@{s.policy.version}",
        failed_output="" if output is None else str(output),
        error=_error(last),
    )
    if package.errors and last is not None:
        package.errors[-1]["message"] = last.message
    return package


def _error(last: Any) -> dict[str, Any]:
    if last is None:
        return {}
    return {
        "error_type": last.error_type.value,
        "message": last.message,
        "code": last.code,
        "status": last.status,
        "stack_digest": last.stack_digest,
    }
