"""Errors the SDK raises into agent code, in one hierarchy.

RetryLensError                        (retrylens.errors)
└── GovernorError                     something the governor decided or refused
    ├── PolicyError                   a policy file/object is invalid (names the field)
    ├── TaskStopped                   the governor stopped a task; carries the last verdict
    │   ├── GaveUp                    no further attempt is worth making
    │   ├── HandedOff                 the task went to a human (package sent to a channel)
    │   └── ChainCancelled            cancel_chain() was called for the task or its parent
    └── SideEffectError               a guarded side effect is in an unknown or failed state

Each carries the task id and, where there is one, the decision's reason, so a caller can
log or show it without digging through events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrylens.errors import RetryLensError

if TYPE_CHECKING:
    from .rules import Verdict


class GovernorError(RetryLensError):
    """Base of every error the SDK raises on purpose."""


class PolicyError(GovernorError):
    """A policy failed validation; ``field`` names the first offending field."""

    def __init__(self, message: str, *, field: str = "", source: str = "") -> None:
        super().__init__(message)
        self.field = field
        self.source = source


class TaskStopped(GovernorError):
    """The governor stopped the task instead of retrying."""

    def __init__(
        self, task_id: str, verdict: Verdict, last_error: BaseException | None = None
    ) -> None:
        super().__init__(f"task {task_id}: {verdict.decision.value}: {verdict.reason}")
        self.task_id = task_id
        self.verdict = verdict
        self.last_error = last_error


class GaveUp(TaskStopped):
    """No retry is allowed or worth it."""


class HandedOff(TaskStopped):
    """The task was handed to a human through the configured channel."""


class ChainCancelled(TaskStopped):
    """The task (or the chain it belongs to) was cancelled."""


class SideEffectError(GovernorError):
    """A side-effecting call failed or its state is unknown."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key
