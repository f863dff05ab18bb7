"""Every error RetryLens raises on purpose, in one hierarchy, importable by agent and server.

RetryLensError
├── ConfigError                 bad settings, config file or CLI argument
│   ├── ArgumentError           a command's argument is refused (the user's input, not settings)
│   ├── CandidateError          a shadow candidate policy file cannot be used
│   └── TraceFormatError        a trace file is missing or a line is not a trace record
├── EventTooLargeError          an event serialized past the schema's size limit
├── GovernorError               something the SDK's governor decided or refused
│   ├── PolicyError             a policy file/object is invalid (names the field)
│   ├── TaskStopped             the governor stopped a task; carries the last verdict
│   │   ├── GaveUp              no further attempt is worth making
│   │   ├── HandedOff           the task went to a human (package sent to a channel)
│   │   └── ChainCancelled      cancel_chain() was called for the task or its parent
│   ├── SideEffectError         a guarded side effect is in an unknown or failed state
│   ├── AsyncToolInPlainCall    a step of a plain call returned an awaitable (use acall)
│   ├── CoroutineNeverAwaited   governed code created a coroutine and dropped it unawaited
│   └── HandoffError            a hand-off channel could not deliver the package
├── ApiError                    the RetryLens API answered with an error status
├── OtlpDecodeError             a body sent to /v1/traces is not an OTLP trace export (400)
│   ├── OtlpUnsupported         its content type or encoding is not one the server reads (415)
│   └── OtlpTooLarge            it inflates past the server's limit (413)
├── StoreError                  the ClickHouse store could not do what was asked
│   ├── StoreLockedError        an embedded store is owned by another process
│   ├── MigrationError          a schema migration failed
│   └── ModelNotFoundError      no trained risk model exists yet
└── IngestError                 the event pipeline had to stop
    ├── SpoolLockedError        another process is writing this spool folder
    ├── SpoolWriteError         records could not be persisted (a full disk); nothing of them kept
    └── InvalidBurstError       too many invalid messages: the consumer stops instead of
                                draining the topic into the dead-letter queue

Each carries enough context to act on without reading a traceback. This module imports
nothing but the standard library, so the agent SDK can raise and catch every one of them.
"""

from __future__ import annotations

from typing import Any, Protocol


class _Verdict(Protocol):
    """What a stopped task's error needs of the governor's verdict (``retrylens.sdk.core.rules``).

    A protocol, so this module imports nothing of the SDK (no import cycle).
    """

    @property
    def decision(self) -> Any: ...

    @property
    def reason(self) -> str: ...


class RetryLensError(Exception):
    """Base of every deliberate RetryLens error."""


# -- configuration ----------------------------------------------------------------------
class ConfigError(RetryLensError):
    """Settings, a config file or a command-line argument is invalid."""


class ArgumentError(ConfigError):
    """A command refused the value the user passed (``--webhook``, ``--metric``...).

    A :class:`ConfigError` (exit 2, like a bad setting), told apart so that the message
    blames the argument the user typed, not the configuration.
    """


class CandidateError(ConfigError):
    """A candidate policy file cannot be used; the message names the file and the field."""

    def __init__(self, message: str, *, path: str, field: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.field = field


class TraceFormatError(ConfigError):
    """A trace file is missing or a line is not a valid trace record; names file and line."""


# -- events -----------------------------------------------------------------------------
class EventTooLargeError(RetryLensError, ValueError):
    """An event serialized past the schema's byte limit (``MAX_EVENT_BYTES``)."""

    def __init__(self, size: int, limit: int | None = None) -> None:
        if limit is None:
            from retrylens.schemas.limits import MAX_EVENT_BYTES

            limit = MAX_EVENT_BYTES
        super().__init__(
            f"event is {size} bytes, over the {limit}-byte limit: "
            "trim error_detail.message, context_snapshot.last_messages or input_features"
        )
        self.size = size
        self.limit = limit


# -- the agent SDK ----------------------------------------------------------------------
class GovernorError(RetryLensError):
    """Base of every error the SDK raises into agent code on purpose."""


class PolicyError(GovernorError):
    """A policy failed validation; ``field`` names the first offending field."""

    def __init__(self, message: str, *, field: str = "", source: str = "") -> None:
        super().__init__(message)
        self.field = field
        self.source = source


class TaskStopped(GovernorError):
    """The governor stopped the task instead of retrying."""

    def __init__(
        self, task_id: str, verdict: _Verdict, last_error: BaseException | None = None
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


class AsyncToolInPlainCall(GovernorError, TypeError):
    """A step or side effect of a plain ``call`` returned an awaitable: a usage error, not a
    failed attempt, so it is raised at once instead of being retried."""


class CoroutineNeverAwaited(GovernorError, TypeError):
    """Code run by a governed attempt created a coroutine and dropped it without awaiting
    it (``charge(10)`` where ``await charge(10)`` was meant): nothing of it ran, so the
    attempt is not a success. A usage error, raised at once instead of being retried;
    ``coroutines`` names the dropped ones (their qualified names)."""

    def __init__(self, message: str, *, coroutines: tuple[str, ...]) -> None:
        super().__init__(message)
        self.coroutines = coroutines


class HandoffError(GovernorError):
    """A hand-off channel could not deliver the package."""


# -- the HTTP API -----------------------------------------------------------------------
class ApiError(RetryLensError):
    """The RetryLens API answered with an error status (``status``, ``detail``, ``url``)."""

    def __init__(self, status: int, detail: Any, url: str) -> None:
        super().__init__(f"RetryLens API {url} answered {status}: {detail}")
        self.status = status
        self.detail = detail
        self.url = url


class OtlpDecodeError(RetryLensError, ValueError):
    """The body is not an OTLP trace export request."""


class OtlpUnsupported(OtlpDecodeError):
    """The body's content type or encoding is not one this server reads (415)."""


class OtlpTooLarge(OtlpDecodeError):
    """The compressed body inflates past ``api_max_inflated_bytes`` (413); inflation stopped there."""

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit

    def __reduce__(self) -> tuple[Any, ...]:  # raised in the worker process, re-raised in the server
        return _too_large, (str(self), self.limit)


def _too_large(message: str, limit: int) -> OtlpTooLarge:
    return OtlpTooLarge(message, limit=limit)


# -- the store --------------------------------------------------------------------------
class StoreError(RetryLensError):
    """The store could not complete an operation."""


class StoreLockedError(StoreError):
    """The embedded chDB data directory is open in another process."""

    def __init__(self, path: str, api_url: str) -> None:
        super().__init__(
            f"the embedded store at {path} is owned by another process (chDB allows one process "
            f"per data directory). Reach it through that process's API at {api_url} "
            "(set RETRYLENS_API_URL if it listens elsewhere), stop that process, or point "
            "RETRYLENS_CLICKHOUSE_DSN at a ClickHouse server so that every process connects directly."
        )
        self.path = path
        self.api_url = api_url


class MigrationError(StoreError):
    """A migration statement failed; the message names the migration."""


class ModelNotFoundError(StoreError):
    """No trained model exists yet; run ``retrylens train``."""


# -- ingest -----------------------------------------------------------------------------
class IngestError(RetryLensError):
    """The ingest pipeline cannot continue."""


class SpoolLockedError(IngestError):
    """Another process is writing this spool folder."""


class SpoolWriteError(IngestError):
    """An append could not be persisted (a full disk, an I/O error) and was rolled back:
    none of its records was kept, so the caller must not acknowledge them; retry later."""


class InvalidBurstError(IngestError):
    """The share or run of invalid messages crossed the configured limit."""

    def __init__(self, reason: str, *, topic: str, partition: int, offset: int) -> None:
        super().__init__(
            f"stopping the consumer: {reason} (at {topic}[{partition}]@{offset}). The topic is "
            "not drained into the dead-letter queue; fix the producer, then restart the consumer."
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset
