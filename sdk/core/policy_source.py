"""The policy in force: one thread-safe holder that every running task reads from.

Watchers (:mod:`~retrylens.sdk.core.hot_reload`) and the kill switch put new policies here;
an invalid proposal is rejected and the running policy stays in force, with
``last_error`` saying which field was wrong.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from retrylens.errors import PolicyError

if TYPE_CHECKING:
    from .policy import RetryPolicy

log = logging.getLogger(__name__)


class PolicySource:
    """Thread-safe holder of the policy in force."""

    def __init__(self, policy: RetryPolicy | None = None) -> None:
        if policy is None:
            from .policy import RetryPolicy

            policy = RetryPolicy()
        self._policy = policy
        self._lock = threading.Lock()
        self.last_error: str | None = None
        self.reloads = 0
        self._listeners: list[Callable[[RetryPolicy], object]] = []

    @property
    def current(self) -> RetryPolicy:
        return self._policy

    def set(self, policy: RetryPolicy) -> bool:
        """Put ``policy`` in force; returns False when it is the same id and version."""
        with self._lock:
            if policy == self._policy:
                return False
            self._policy = policy
            self.reloads += 1
            self.last_error = None
        for listener in self._listeners:
            listener(policy)
        log.info("retry policy %s@%s in force", policy.id, policy.version)
        return True

    def propose(self, load: Callable[[], RetryPolicy]) -> bool:
        """Try ``load()``; on :class:`PolicyError` keep the running policy and record why."""
        try:
            policy = load()
        except PolicyError as exc:
            self.last_error = str(exc)
            log.error(
                "policy update rejected, keeping %s@%s: %s",
                self._policy.id,
                self._policy.version,
                exc,
            )
            return False
        return self.set(policy)

    def on_change(self, listener: Callable[[RetryPolicy], object]) -> None:
        self._listeners.append(listener)

    def kill(self, *, agent: str | None = None) -> None:
        """Operator kill switch from code: no automatic retries for ``agent`` or the project."""
        current = self.current
        switch = current.kill_switch
        if agent is None:
            switch = switch.model_copy(update={"project": True})
        else:
            switch = switch.model_copy(update={"agents": switch.agents | {agent}})
        self.set(
            current.model_copy(update={"kill_switch": switch, "version": f"{current.version}+kill"})
        )
