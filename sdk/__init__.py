"""The RetryLens agent SDK: every retry decided explicitly, protected and recorded.

Start with :class:`Governor` (``call`` / ``acall`` / ``governed`` / ``start``), a
:class:`RetryPolicy` (``load_policy``), and an emitter from ``retrylens.ingest``.
"""

from .adapters_tenacity import TenacityHooks
from .backoff import jitter, wait_exponential, wait_none, wait_retry_after
from .breaker import CircuitBreaker
from .budget import RetryThrottle, TaskLedger
from .context import ContextBuilder, drop_echoed_input, pollution_score, snapshot
from .errors import (
    ChainCancelled,
    GaveUp,
    GovernorError,
    HandedOff,
    PolicyError,
    SideEffectError,
    TaskStopped,
)
from .features import extract_input_features, input_fingerprint
from .governor import Governor, TaskRun, VirtualClock, current_run
from .handoff import CallbackChannel, FileChannel, HandoffPackage, WebhookChannel
from .history import FailureHistory
from .hot_reload import ApiPoller, FileWatcher, PolicySource, poll_in_background
from .policy import RetryPolicy, load_policy, parse_policy, policy_from_env
from .preflight import PrecheckRequest, PrecheckResponse, Preflight
from .rules import Rule, Verdict, default_rules
from .sanitizer import Failure, classify, redact
from .side_effects import ClickHouseKeyStore, MemoryKeyStore, SqliteKeyStore, idempotency_key
from .state import Attempt, TaskState

__all__ = [
    # governing calls
    "Governor",
    "TaskRun",
    "Attempt",
    "TaskState",
    "Verdict",
    "current_run",
    "VirtualClock",
    # policy and its parts
    "RetryPolicy",
    "load_policy",
    "parse_policy",
    "policy_from_env",
    "PolicySource",
    "FileWatcher",
    "ApiPoller",
    "poll_in_background",
    "Rule",
    "default_rules",
    "wait_exponential",
    "wait_retry_after",
    "wait_none",
    "jitter",
    "CircuitBreaker",
    "RetryThrottle",
    "TaskLedger",
    "FailureHistory",
    # failures, context, side effects
    "Failure",
    "classify",
    "redact",
    "ContextBuilder",
    "drop_echoed_input",
    "pollution_score",
    "snapshot",
    "idempotency_key",
    "MemoryKeyStore",
    "SqliteKeyStore",
    "ClickHouseKeyStore",
    # hand-off, pre-flight, features
    "HandoffPackage",
    "CallbackChannel",
    "FileChannel",
    "WebhookChannel",
    "Preflight",
    "PrecheckRequest",
    "PrecheckResponse",
    "extract_input_features",
    "input_fingerprint",
    # adapters
    "TenacityHooks",
    # errors
    "GovernorError",
    "PolicyError",
    "TaskStopped",
    "GaveUp",
    "HandedOff",
    "ChainCancelled",
    "SideEffectError",
]
