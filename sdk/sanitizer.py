"""From raw exceptions to the taxonomy, and nothing secret leaves the process.

:func:`classify` maps an exception (ours, the standard library's, httpx's, or an SDK's
recognised by name and status code) to a :class:`Failure`: error type, whether a retry can
help, a short model-safe message, Retry-After. :func:`redact` removes API keys, bearer
tokens and ``Authorization`` values of any scheme, passwords in URLs, e-mail addresses and
card numbers (Luhn-valid, written as cards are) from any text before it is put on an event
or shown to a model. People's names are left to :mod:`.personal`: a model retrying the task
must still see them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retrylens.schemas.limits import MAX_ERROR_MESSAGE_CHARS
from retrylens.schemas.taxonomy import ErrorType

from .http_status import status_type
from .lazy_pattern import LazyPattern

if TYPE_CHECKING:
    from retrylens.schemas import ErrorDetail

    from .http_attempts import Physical

_REDACTIONS: list[tuple[LazyPattern, str]] = [
    # "Authorization: Basic bWVp…", "Digest username=…, response=…", any scheme, or none
    (
        LazyPattern(
            r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)([a-z][\w\-]*\s+)?"
            r"((?:[\w\-]+=(?:\"[^\"]*\"|[^\s,\"']*)(?:\s*,\s*)?)+|[^\s\"',;]+)"
        ),
        r"\1\2[REDACTED]",
    ),
    (LazyPattern(r"(?i)\b(bearer)\s+[a-z0-9._\-+/=]{8,}"), r"\1 [REDACTED]"),
    (LazyPattern(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s:@]+:[^@\s/]+@"), r"\1[REDACTED]@"),
    (LazyPattern(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{16,}\b"), "[REDACTED_KEY]"),
    (LazyPattern(r"\bAKIA[0-9A-Z]{16}\b"), "[REDACTED_KEY]"),
    (
        LazyPattern(r"\b(ghp|gho|ghs|ghu|ghr|github_pat|xox[abpr])_?[A-Za-z0-9_\-]{16,}\b"),
        "[REDACTED_KEY]",
    ),
    (LazyPattern(r"\bAIza[0-9A-Za-z_\-]{30,}"), "[REDACTED_KEY]"),
    (
        LazyPattern(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),
        "[REDACTED_JWT]",
    ),
    (
        LazyPattern(
            r"(?i)\b(api[_\-]?key|secret|token|password|passwd|pwd)([\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]+"
        ),
        r"\1\2[REDACTED]",
    ),
    # "password hunter2xyz", "token is abc123secret": a value with a digit or symbol in it
    (
        LazyPattern(
            r"(?i)\b(api[_\-]?key|secret|token|password|passwd|pwd)(\s+(?:is\s+|of\s+)?)"
            r"(?=[^\s\[]*[\d!@#$%^&*_])[^\s\[\"',;&]{6,}"
        ),
        r"\1\2[REDACTED]",
    ),
    (LazyPattern(r"\b[\w.+\-]+@[\w\-]+\.[\w.\-]+\b"), "[EMAIL]"),
]
_PAYLOAD = LazyPattern(
    r"[\[{].*$"
)  # a quoted JSON payload: never echo a failed output to the model
#: a card number stands alone, unbroken or grouped as printed (4-4-4-4[-3], 4-6-5, 4-6-4);
#: a digit run of a table ("12345 67890 13579") is not one, whatever its checksum
_CARD = LazyPattern(
    r"(?<![\d.,])(?<!\d[ \-])"
    r"(?:\d{13,19}|\d{4}([ \-])\d{4}\1\d{4}\1\d{4}(?:\1\d{3})?|\d{4}([ \-])\d{6}\2\d{4,5})"
    r"(?!\d)(?![ \-]\d)"
)
_CARD_FIRST_DIGITS = "23456"  # the card networks' ranges (Mastercard 2/5, Amex 3, Visa 4, …)


def _luhn_ok(digits: str) -> bool:
    total, parity = 0, len(digits) % 2
    for i, ch in enumerate(digits):
        d = int(ch)
        if i % 2 == parity:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    is_card = digits[0] in _CARD_FIRST_DIGITS and _luhn_ok(digits)
    return "[CARD]" if is_card else match.group(0)


def redact(text: str, *, limit: int | None = None) -> str:
    """``text`` without secrets or personal data, optionally cut to ``limit`` characters.

    Memoised for short texts: an agent's reasons, summaries and prompts repeat a lot, and
    each text passes a dozen patterns (events re-check what a snapshot already cleaned).
    """
    if len(text) <= 2_048:
        return _redact_cached(text, limit)
    return _redact(text, limit)


@functools.lru_cache(maxsize=4_096)
def _redact_cached(text: str, limit: int | None) -> str:
    return _redact(text, limit)


#: Before matching, a text far past its limit is cut (matching a megabyte costs): at the
#: limit plus a margin that holds any short secret at the edge whole, and then on to the
#: end of the unbroken token the cut falls in, so that a long one (a JWT of a thousand
#: characters, a key=value) is matched whole too and never leaks its first part. A token
#: longer than ``_LONGEST_TOKEN`` is cut at that length.
_CUT_MARGIN = 256
_LONGEST_TOKEN = 65_536
_TOKEN_TAIL = LazyPattern(rf"\S{{0,{_LONGEST_TOKEN}}}")


def _redact(text: str, limit: int | None) -> str:
    if limit is not None and len(text) > limit + _CUT_MARGIN:
        end = limit + _CUT_MARGIN
        tail = _TOKEN_TAIL.compiled.match(text, end)
        text = text[: tail.end() if tail is not None else end]
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    text = _CARD.sub(_card, text)
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


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
    from .http_attempts import retry_after_ms

    return retry_after_ms(headers)


def _headers(exc: BaseException) -> Any:
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None) or getattr(exc, "headers", None)


def _server_says_retry(exc: BaseException) -> bool | None:
    """The server's ``x-should-retry`` (kept aside by the provider hook when it took over)."""
    response = getattr(exc, "response", None)
    extensions = getattr(response, "extensions", None)
    from .http_attempts import SHOULD_RETRY_EXTENSION, should_retry

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
_RESENDS = __name__.rpartition(".")[0] + ".http_resends"


def _provider_error_behind(exc: BaseException) -> BaseException | None:
    """The provider failure a governed attempt saw behind ``exc`` (see :mod:`.http_resends`)."""
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
