"""The policy in force, and how it changes at runtime without restarting the agent.

:class:`PolicySource` holds the current policy. Watchers propose new ones: a
:class:`FileWatcher` when the file changes, an :class:`ApiPoller` from
``GET {api_url}/v1/policies/{project}/{agent}``. An invalid proposal is rejected — the
running policy stays in force and ``last_error`` says which field was wrong — so a bad
deploy of a policy file can never leave an agent without one. ``poll_in_background``
runs watchers on a daemon thread; tests call ``poll()`` directly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

import httpx

from .api_auth import auth_headers
from .errors import PolicyError
from .policy import RetryPolicy, load_policy, parse_policy

log = logging.getLogger(__name__)


class PolicySource:
    """Thread-safe holder of the policy in force."""

    def __init__(self, policy: RetryPolicy | None = None) -> None:
        self._policy = policy or RetryPolicy()
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


class Watcher(Protocol):
    def poll(self) -> bool: ...


class FileWatcher:
    """Reloads when the file's mtime or size changes."""

    def __init__(self, source: PolicySource, path: str | Path) -> None:
        self.source = source
        self.path = Path(path)
        self._seen: tuple[float, int] | None = None

    def poll(self) -> bool:
        try:
            stat = self.path.stat()
        except OSError as exc:
            self.source.last_error = f"policy file {self.path}: {exc}"
            return False
        signature = (stat.st_mtime, stat.st_size)
        if signature == self._seen:
            return False
        self._seen = signature
        return self.source.propose(lambda: load_policy(self.path))


class ApiPoller:
    """Fetches the agent's policy from the RetryLens API (ETag-aware); errors keep the policy."""

    def __init__(
        self,
        source: PolicySource,
        api_url: str,
        project: str,
        agent: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 1.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.source = source
        self.url = f"{api_url.rstrip('/')}/v1/policies/{project}/{agent}"
        self.timeout_s = timeout_s
        self.client = client or httpx.Client(timeout=timeout_s, headers=auth_headers(api_key))
        self._etag: str | None = None

    def poll(self) -> bool:
        headers = {"If-None-Match": self._etag} if self._etag else {}
        try:
            response = self.client.get(self.url, headers=headers)
        except httpx.HTTPError as exc:
            self.source.last_error = f"policy API unreachable ({exc}); keeping the running policy"
            return False
        if response.status_code in (304, 404):
            return False
        if response.status_code != 200:
            self.source.last_error = (
                f"policy API answered {response.status_code}; keeping the running policy"
            )
            return False
        self._etag = response.headers.get("etag")
        try:
            data = response.json()
        except ValueError:
            self.source.last_error = "policy API returned invalid JSON; keeping the running policy"
            return False
        return self.source.propose(lambda: parse_policy(data, source=self.url))


def poll_in_background(
    watchers: Iterable[Watcher], *, interval_s: float = 5.0
) -> Callable[[], None]:
    """Poll ``watchers`` every ``interval_s`` on a daemon thread; returns a stop function."""
    stop = threading.Event()
    items = list(watchers)

    def loop() -> None:
        while not stop.wait(interval_s):
            for watcher in items:
                try:
                    watcher.poll()
                except Exception:  # noqa: BLE001 - a watcher must never kill the agent
                    log.exception("policy watcher failed")

    thread = threading.Thread(target=loop, name="retrylens-policy", daemon=True)
    thread.start()
    return stop.set
