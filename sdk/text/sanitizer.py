"""From raw exceptions to the taxonomy, and nothing secret leaves the process.

:func:`classify` maps an exception (ours, the standard library's, httpx's, or an SDK's
recognised by name and status code) to a :class:`Failure`: error type, whether a retry can
help, a short model-safe message, Retry-After. :func:`redact` (:mod:`.redaction`, the
patterns the server shares) removes secrets and personal numbers from any text before it is
put on an event or shown to a model. People's names are left to :mod:`.personal`: a model
retrying the task must still see them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retrylens.schemas.limits import MAX_ERROR_MESSAGE_CHARS
from retrylens.schemas.taxonomy import ErrorType

from .http_status import status_type
from .lazy_pattern import LazyPattern
from .redaction import redact

__all__ = ["Failure", "classify", "redact", "stack_digest"]

if TYPE_CHECKING:
    from retrylens.schemas import ErrorDetail

    from ..integrations.providers.http_attempts import Physical

#: a quoted JSON payload: never echo a failed output to the model
_PAYLOAD = LazyPattern(r"[\[{].*$")


@dataclass
class Failure(Exception):  # noqa: N818 - it is raised, but it names a failure, not an error kind
    """A classified failure. Agents may raise it directly to state the class themselves."""

    error_type: ErrorType
    message: str = ""
    retryable: bool | None = None
    code: str = ""
    status: int | None = None
    retry_after_ms: int | None = None
    missing_field: str | None = None
    output: object = None
    stack_digest: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @classmethod
    def of_request(cls, request: Physical) -> Failure:
        """A failed provider request (seen by the provider hook) as the failure a run records."""
        assert request.error_type is not None
        return cls(
            request.error_type,
            message=request.message,
            retryable=request.should_retry,
            code=request.code,
            status=request.status,
            retry_after_ms=request.retry_after_ms,
        )

    def __post_init__(self) -> None:
        super().__init__(self.message)
        if type(self.error_type) is not ErrorType:
            self.error_type = ErrorType(self.error_type)
        if self.retryable is None:
            self.retryable = self.error_type not in _NOT_RETRYABLE

    def __hash__(self) -> int:
        return id(self)

    def __str__(self) -> str:
        return f"{self.error_type.value}: {self.message}"

    def safe_message(self) -> str:
        """One redacted line a model may see ("the last try failed because …")."""
        output = self.output if isinstance(self.output, str) else ""
        if len(self.message) <= 2_048 and len(output) <= 2_048:
            return _safe_message(self.error_type, self.message, output)  # retries repeat it
        return _safe_message.__wrapped__(self.error_type, self.message, output)

    def detail(self) -> ErrorDetail:
        from retrylens.schemas.event import ErrorDetail

        return ErrorDetail(
            message=redact(self.message, limit=MAX_ERROR_MESSAGE_CHARS),
            code=self.code[:128],
            status=self.status if self.status is None or 0 <= self.status <= 999 else None,
            stack_digest=self.stack_digest,
        )


_NOT_RETRYABLE = frozenset({ErrorType.CANCELLED, ErrorType.BUDGET_EXHAUSTED})


@functools.lru_cache(maxsize=1_024)
def _safe_message(error_type: ErrorType, message: str, output: str) -> str:
    """:meth:`Failure.safe_message` of a failure's class, message and (text) output."""
    if output:
        message = message.replace(output, "<output omitted>")
    message = _PAYLOAD.sub("<output omitted>", message)
    line = redact(message.splitlines()[0] if message else "", limit=200)
    return f"{error_type.value}" + (f": {line}" if line else "")


_BY_NAME: dict[str, ErrorType] = {
    "RateLimitError": ErrorType.RATE_LIMIT,
    "OverloadedError": ErrorType.RATE_LIMIT,  # Anthropic's 529 (an InternalServerError): see http_status
    "APITimeoutError": ErrorType.TIMEOUT,
    "APIConnectionError": ErrorType.NETWORK,
    "InternalServerError": ErrorType.SERVER_ERROR,
    "ServiceUnavailableError": ErrorType.SERVER_ERROR,
    "OutputParserException": ErrorType.SCHEMA_MISMATCH,
    "ValidationError": ErrorType.SCHEMA_MISMATCH,
    "JSONDecodeError": ErrorType.SCHEMA_MISMATCH,
    "ContextWindowExceededError": ErrorType.CONTEXT_OVERFLOW,
    "ToolException": ErrorType.TOOL_ERROR,
}
_OVERFLOW_TEXT = LazyPattern(
    r"(?i)context (length|window)|maximum context|too many tokens|prompt is too long"
)


def _status_type(status: int) -> ErrorType:
    """The class of a status an exception carries (the hook's table; a success status: validation)."""
    return status_type(status) or ErrorType.VALIDATION


def _retry_after_ms(exc: BaseException) -> int | None:
    """How long the failure asked to wait: a ``retry_after`` attribute (seconds or a
    timedelta, as several client libraries carry it), else the response's ``retry-after-ms``
    (OpenAI sends it) or ``Retry-After`` (seconds or an HTTP date). Broken values are absent."""
    attribute = getattr(exc, "retry_after", None)
    if attribute is not None:
        seconds = getattr(attribute, "total_seconds", None)
        try:
            value = float(seconds() if callable(seconds) else attribute)
        except (TypeError, ValueError):
            value = -1.0
        if 0 <= value < 1e9:
            return int(value * 1000)
    headers = _headers(exc)
    if not headers:
        return None
    from ..integrations.providers.http_attempts import retry_after_ms

    return retry_after_ms(headers)


def _headers(exc: BaseException) -> Any:
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None) or getattr(exc, "headers", None)


def _server_says_retry(exc: BaseException) -> bool | None:
    """The server's ``x-should-retry`` (kept aside by the provider hook when it took over)."""
    response = getattr(exc, "response", None)
    extensions = getattr(response, "extensions", None)
    from ..integrations.providers.http_attempts import SHOULD_RETRY_EXTENSION, should_retry

    if isinstance(extensions, dict) and SHOULD_RETRY_EXTENSION in extensions:
        return extensions[SHOULD_RETRY_EXTENSION]  # type: ignore[no-any-return]
    headers = _headers(exc)
    return should_retry(headers) if headers else None


def stack_digest(exc: BaseException) -> str | None:
    """A digest of where the exception was raised (file, function, line), not of its text.

    Walks the traceback's frames directly: ``traceback.extract_tb`` would also stat every
    source file and compute column positions (~5× the cost), for the same digest. The
    digest of a place is memoised: a retried failure is raised at the same place again.
    """
    tb = exc.__traceback__
    frames: list[tuple[str, str, int]] = []
    while tb is not None:
        code = tb.tb_frame.f_code
        # the place as strings: their hashes are cached, a code object's is recomputed
        frames.append((code.co_filename, code.co_name, tb.tb_lineno))
        tb = tb.tb_next
    if not frames:
        return None
    return _place_digest(type(exc).__name__, tuple(frames[-5:]))


@functools.lru_cache(maxsize=1024)
def _place_digest(name: str, frames: tuple[tuple[str, str, int], ...]) -> str:
    where = "|".join(
        f"{path.rsplit('/', 1)[-1]}:{function}:{line}" for path, function, line in frames
    )
    return hashlib.sha256(f"{name}|{where}".encode()).hexdigest()[:16]


def _status_of(exc: BaseException) -> int | None:
    for attr in ("status_code", "status", "http_status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def _error_type(exc: BaseException, status: int | None) -> ErrorType:
    """The class of ``exc``: it depends only on its type, status and text (memoised)."""
    text = str(exc)
    if len(text) <= 2_048:
        return _error_type_of(type(exc), status, text)
    return _classify_type(type(exc), status, text)


@functools.lru_cache(maxsize=1_024)
def _error_type_of(kind: type[BaseException], status: int | None, text: str) -> ErrorType:
    return _classify_type(kind, status, text)


def _classify_type(kind: type[BaseException], status: int | None, text: str) -> ErrorType:
    asyncio: Any = sys.modules.get("asyncio")
    if asyncio is not None and issubclass(kind, asyncio.CancelledError):
        return ErrorType.CANCELLED
    names = [cls.__name__ for cls in kind.__mro__]
    for name in names:
        if name in _BY_NAME and not (name == "ValidationError" and status):
            return _BY_NAME[name]
    if _OVERFLOW_TEXT.search(text):
        return ErrorType.CONTEXT_OVERFLOW
    if status is not None:
        return _status_type(status)
    if issubclass(kind, TimeoutError) or "Timeout" in kind.__name__:
        return ErrorType.TIMEOUT
    if (
        issubclass(kind, ConnectionError | OSError)
        or "ConnectError" in names
        or "NetworkError" in names
    ):
        return ErrorType.NETWORK
    if issubclass(kind, json.JSONDecodeError):
        return ErrorType.SCHEMA_MISMATCH
    if issubclass(kind, KeyError | TypeError | AttributeError | AssertionError | ZeroDivisionError):
        return ErrorType.LOGIC
    if issubclass(kind, ValueError):
        return ErrorType.VALIDATION
    return ErrorType.UNKNOWN


#: loaded with the first request that failed inside a governed attempt (none: nothing seen)
_RESENDS = __name__.rsplit(".", 2)[0] + ".integrations.providers.http_resends"


def _provider_error_behind(exc: BaseException) -> BaseException | None:
    """The provider failure a governed attempt saw behind ``exc`` (see :mod:`~retrylens.sdk.integrations.providers.http_resends`)."""
    resends = sys.modules.get(_RESENDS)
    return None if resends is None else resends.provider_error_behind(exc)  # type: ignore[no-any-return]


def classify(exc: BaseException) -> Failure:
    """The :class:`Failure` for any exception (a ``Failure`` is returned as is)."""
    if not isinstance(exc, Failure) and (exc.__cause__ is not None or exc.__context__ is not None):
        # a user's error wrapped around the provider's failure is classified by that failure
        exc = _provider_error_behind(exc) or exc
    if isinstance(exc, Failure):  # given (a user's explicit typing is kept) or found behind
        if exc.stack_digest is None:
            exc.stack_digest = stack_digest(exc)
        return exc
    status = _status_of(exc)
    error_type = _error_type(exc, status)
    return Failure(
        error_type,
        message=redact(f"{type(exc).__name__}: {exc}", limit=MAX_ERROR_MESSAGE_CHARS),
        retryable=_server_says_retry(exc) if status is not None else None,
        code=type(exc).__name__,
        status=status,
        retry_after_ms=_retry_after_ms(exc),
        stack_digest=stack_digest(exc),
    )
