"""A provider client's own retries inside an adapter's attempt, recorded as attempts of its task.

pydantic-ai's ``run_governed``, the LangChain callback handler and the tenacity hooks
record a model call as an attempt of their task, but they do not own the provider
client's retries: the openai client still resends a 429 inside that one call (taking
them away would leave those frameworks, which rely on the client for HTTP retries, with
none). So they count them: while an adapter's attempt is in progress it sets a
:class:`ClientRetries` as :data:`attempt_scope.recorded <.attempt_scope.recorded>`, the
provider hook reports each physical request to it, and a request sent to the same
method, host and path after a failed one is the client's retry: the failed request is
recorded on the current attempt (typed from its status and headers), a retry decision
says "the client retried on its own after N ms", and the next attempt begins. The
adapter ends whatever attempt :attr:`ClientRetries.attempt` holds when the call returns.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .http_attempts import Physical
    from .run import TaskRun
    from .state import Attempt


class ClientRetries:
    """The attempt in progress of an adapter's task run, advanced by the client's retries."""

    __slots__ = ("run", "attempt", "failed", "last_end")

    def __init__(self, run: TaskRun, attempt: Attempt) -> None:
        self.run = run
        self.attempt = attempt
        self.failed: Physical | None = None  # the last request, when it failed
        self.last_end = 0.0

    def restart(self, attempt: Attempt) -> None:
        """The adapter began ``attempt`` itself (its own retry): nothing is pending."""
        self.attempt, self.failed = attempt, None

    def physical(self, request: Physical) -> None:
        """One request the provider hook saw inside this attempt."""
        now = time.monotonic()
        failed = self.failed
        if failed is not None and (failed.method, failed.host, failed.path) == (
            request.method,
            request.host,
            request.path,
        ):
            self._retried(
                failed, max(0, int((now - request.latency_ms / 1000 - self.last_end) * 1000))
            )
        self.failed = request if request.failed else None
        self.last_end = now

    def _retried(self, failed: Physical, waited_ms: int) -> None:
        from retrylens.schemas.taxonomy import Decision

        from .rules import Verdict
        from .sanitizer import Failure

        self.run.record_failure(
            self.attempt, Failure.of_request(failed), latency_ms=failed.latency_ms
        )
        decision = Decision.RETRY_BACKOFF if waited_ms else Decision.RETRY_SAME
        reason = f"the client retried on its own after {waited_ms} ms ({failed.host})"
        self.run.record_decision(self.attempt, Verdict(decision, reason, backoff_ms=waited_ms))
        self.attempt = self.run.begin()
