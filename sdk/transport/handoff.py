"""Handing a task to a human: one package, pluggable channels (webhook, file, callback).

The package holds what a person needs to pick the task up — inputs, the context the last
attempt was given, the outputs verified so far, every failure and the governor's reason.
Every channel delivers it redacted (secrets and people's names, as events are:
:meth:`HandoffPackage.redacted`) unless it was built with ``raw=True``, for a channel the
deployment trusts with the customer's data. A channel that cannot deliver raises
:class:`HandoffError`; the governor records that on the handoff event and still stops the
task.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from retrylens.errors import HandoffError

from ..text.personal import redact_names
from ..text.sanitizer import redact


def _clean(text: str, limit: int | None = None) -> str:
    return redact_names(redact(text, limit=limit))


def _clean_json(value: Any) -> Any:
    """``value`` made JSON-ready with every string in it cleaned, keys too.

    Each string is cleaned as itself, before anything is serialised: ``json.dumps`` writes
    a non-Latin name as ``\\uXXXX`` escapes, which no name finder recognises."""
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, dict):
        return {_clean(str(k)): _clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_clean_json(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _clean(str(value))  # what json.dumps(default=str) would have written


@dataclass
class HandoffPackage:
    project: str
    agent: str
    task_id: str
    reason: str
    inputs: str
    context: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    policy: str = ""
    failed_output: str = ""  # what the last attempt produced before it failed, if anything
    error: dict[str, Any] = field(default_factory=dict)  # the last error's detail

    def to_dict(self, *, raw: bool = False) -> dict[str, Any]:
        """JSON-ready and redacted (``raw=True``: as the agent had it, secrets included)."""
        data = asdict(self)
        if raw:
            return json.loads(json.dumps(data, default=str))
        data["reason"] = _clean(self.reason, limit=2_000)
        data["inputs"] = _clean(self.inputs, limit=8_000)
        data["failed_output"] = _clean(self.failed_output, limit=8_000)
        data["error"] = _clean_json(self.error)
        data["context"] = [
            {
                "role": str(m.get("role", "")),
                "content": _clean(str(m.get("content", "")), limit=2_000),
            }
            for m in self.context[-20:]
        ]
        data["outputs"] = _clean_json(self.outputs)
        data["errors"] = _clean_json(self.errors)
        return data

    def redacted(self) -> HandoffPackage:
        """A copy with secrets and people's names removed from every text (what channels send)."""
        return HandoffPackage(**self.to_dict())


class HandoffChannel(Protocol):
    """Delivers a package; ``send`` may return an awaitable (awaited by the governor)."""

    def send(self, package: HandoffPackage) -> object: ...


class CallbackChannel:
    """Calls ``fn(package)`` in-process (queue it, page someone, open a ticket)."""

    blocking = False  # runs inline, also on an event loop (the callback must be quick)

    def __init__(self, fn: Callable[[HandoffPackage], object], *, raw: bool = False) -> None:
        self.fn = fn
        self.raw = raw  # True: ``fn`` gets the package unredacted, secrets and names included

    def send(self, package: HandoffPackage) -> Any:
        """Returns what ``fn`` returns: the governor awaits it when ``fn`` is ``async def``."""
        try:
            return self.fn(package if self.raw else package.redacted())
        except Exception as exc:  # noqa: BLE001 - any callback failure is a delivery failure
            raise HandoffError(f"handoff callback failed: {exc}") from exc


class FileChannel:
    """Appends one JSON line per package to ``path`` (locked, so processes can share it)."""

    blocking = True

    def __init__(self, path: str | Path, *, raw: bool = False) -> None:
        # "handoffs/" (or an existing directory) means a file inside it, not a file "handoffs"
        as_dir = str(path).endswith(("/", "\\")) or Path(path).is_dir()
        self.path = Path(path) / "handoffs.jsonl" if as_dir else Path(path)
        self.raw = raw  # True: the file keeps secrets and names (a store the deployment trusts)

    def send(self, package: HandoffPackage) -> None:
        line = json.dumps(package.to_dict(raw=self.raw), sort_keys=True) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                fh.write(line)
                fh.flush()
                fcntl.flock(fh, fcntl.LOCK_UN)
        except OSError as exc:
            raise HandoffError(f"cannot write handoff file {self.path}: {exc}") from exc


class WebhookChannel:
    """POSTs the package as JSON; any non-2xx answer or network error is a failure."""

    blocking = True  # on an event loop the governor sends it from a worker thread

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 2.0,
        headers: dict[str, str] | None = None,
        raw: bool = False,
    ) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.headers = headers or {}
        self.raw = raw  # True: the receiver gets secrets and names (an endpoint one trusts)

    def send(self, package: HandoffPackage) -> None:
        try:
            import httpx  # only a webhook channel needs it

            response = httpx.post(
                self.url,
                json=package.to_dict(raw=self.raw),
                timeout=self.timeout_s,
                headers=self.headers,
            )
        except httpx.HTTPError as exc:
            raise HandoffError(f"handoff webhook {self.url} unreachable: {exc}") from exc
        if response.status_code >= 300:
            raise HandoffError(f"handoff webhook {self.url} answered {response.status_code}")
