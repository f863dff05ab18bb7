"""How the policy in force changes at runtime without restarting the agent.

:class:`~retrylens.sdk.core.policy_source.PolicySource` holds the current policy. Watchers propose new ones: a
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

from retrylens.errors import ApiError

from ..transport.client import RetryLensClient
from .policy import load_policy, parse_policy
from .policy_source import PolicySource

__all__ = ["ApiPoller", "FileWatcher", "PolicySource", "Watcher", "poll_in_background"]

log = logging.getLogger(__name__)


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
        self.project = project
        self.agent = agent
        self.api = RetryLensClient(api_url, api_key, timeout_s, http=client)
        self.url = f"{self.api.base_url}/v1/policies/{project}/{agent}"
        self._etag: str | None = None

    def poll(self) -> bool:
        try:
            _, etag, data = self.api.agent_policy(self.project, self.agent, etag=self._etag)
        except httpx.HTTPError as exc:
            self.source.last_error = f"policy API unreachable ({exc}); keeping the running policy"
            return False
        except ApiError as exc:
            self.source.last_error = f"policy API answered {exc.status}; keeping the running policy"
            return False
        except ValueError:
            self.source.last_error = "policy API returned invalid JSON; keeping the running policy"
            return False
        if data is None:
            return False
        self._etag = etag
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
