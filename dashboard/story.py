"""One task's events folded into its story: attempts, what each was given, what went wrong.

Pure functions over the rows of :meth:`EventStore.task_events` (or the API's task
endpoint), so the task view's warnings can be tested without Streamlit:

- an **echoed duplicate**: a message digest equal to the one before it (in the same
  attempt's context, or repeated from the previous attempt's context), or the same user
  message twice in a row — the agent fed its input back to itself;
- a **carried error**: the text of an earlier attempt's error inside a later attempt's
  last messages — the failure leaked into the retry;
- a **tool loop**: tool calls identical to the call just before them within the attempt
  (``repeated_tool_calls``, recorded by the SDK's ``Attempt.tool_call``);
- **trailing errors**: the context ends with error messages back to back (at least
  :data:`TRAILING_ERRORS_WARNING`); ``recent_error_share`` is the error share of its last
  N messages.

The error text is matched on its first :data:`CARRY_PREFIX` characters, as the
pollution signal in :mod:`retrylens.analytics.pollution` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from retrylens.analytics.definitions import FIRST_RETRY_ATTEMPT
from retrylens.sdk.core.budget import stopping_budget

CARRY_PREFIX = 40
#: Trailing error messages from which the task view warns (one error can be the answer itself).
TRAILING_ERRORS_WARNING = 2
_MIN_ERROR_CHARS = 8
#: Task-level kinds: they carry the task's correlation id, not an attempt's.
_TASK_KINDS = {"task_started", "task_finished", "handoff"}


@dataclass
class Attempt:
    """Everything recorded about one attempt (one correlation id)."""

    attempt: int
    correlation_id: str
    phase: str = ""
    dependency: str = ""
    started: datetime | None = None
    ended: datetime | None = None
    status: str = "running"
    error_type: str = ""
    error_message: str = ""
    error_code: str = ""
    latency_ms: int = 0
    decision: str = ""
    decision_reason: str = ""
    backoff_ms: int = 0
    degraded: bool = False
    policy: str = ""
    shadow_decision: str = ""
    message_count: int = 0
    token_count: int = 0
    pollution_score: float = 0.0
    trailing_errors: int = 0
    recent_error_share: float = 0.0
    repeated_tool_calls: int = 0
    digests: list[str] = field(default_factory=list)
    last_messages: list[dict[str, str]] = field(default_factory=list)
    side_effects: list[dict[str, Any]] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float = 0.0
    #: Indexes into ``digests`` that repeat the digest before them (or the previous attempt's last).
    echoed_digests: list[int] = field(default_factory=list)
    #: Indexes into ``last_messages`` that repeat the user message before them.
    echoed_messages: list[int] = field(default_factory=list)
    #: Earlier attempts whose error text this attempt's messages contain.
    carried_from: list[int] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"attempt {self.attempt}"

    @property
    def warnings(self) -> list[str]:
        out = []
        if self.echoed_digests or self.echoed_messages:
            out.append("echoed duplicate message")
        out += [f"carries the error of attempt {n}" for n in self.carried_from]
        if self.repeated_tool_calls:
            out.append(f"tool loop: {self.repeated_tool_calls} call(s) identical to the one before")
        if self.trailing_errors >= TRAILING_ERRORS_WARNING:
            out.append(f"context ends with {self.trailing_errors} error messages")
        return out


@dataclass(frozen=True)
class HandoffPackage:
    """What a person picking up a handed-off task reads: the stored, redacted package.

    The SDK stores the package in the ``handoff`` event's context snapshot, one message per
    part (role ``handoff:<part>``): so it is kept with the task's events and found here.
    """

    ts: datetime | None
    reason: str
    input: str = ""
    failed_output: str = ""
    error: dict[str, Any] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    context: list[dict[str, Any]] = field(default_factory=list)
    #: parts stored as text that is not JSON (cut to the schema's message limit)
    raw: dict[str, str] = field(default_factory=dict)


def handoff_package(row: dict[str, Any]) -> HandoffPackage:
    """The package of one ``handoff`` event row (stored or from the API)."""
    snapshot = _json(row.get("context_snapshot"))
    messages = snapshot.get("last_messages") or [] if isinstance(snapshot, dict) else []
    parts = {str(m.get("role", ""))[len("handoff:"):]: str(m.get("content", ""))
             for m in messages if isinstance(m, dict) and str(m.get("role", "")).startswith("handoff:")}
    raw: dict[str, str] = {}

    def decoded(name: str, kind: type) -> Any:
        text = parts.get(name, "")
        try:
            value = json.loads(text) if text else kind()
        except ValueError:
            raw[name] = text
            return kind()
        return value if isinstance(value, kind) else kind()

    error, errors, context = decoded("error", dict), decoded("errors", list), decoded("context", list)
    return HandoffPackage(
        ts=row.get("ts"),
        reason=row.get("decision_reason") or "",
        input=parts.get("input", ""),
        failed_output=parts.get("output", ""),
        error=error,
        errors=[e for e in errors if isinstance(e, dict)],
        context=[m for m in context if isinstance(m, dict)],
        raw=raw,
    )


@dataclass
class TaskStory:
    project: str
    task_id: str
    agent: str = ""
    trace_id: str = ""
    outcome: str = ""
    summary: str = ""
    attempts: list[Attempt] = field(default_factory=list)
    handoffs: list[dict[str, Any]] = field(default_factory=list)
    events: int = 0

    @property
    def handoff_packages(self) -> list[HandoffPackage]:
        """The stored package of every hand-off, oldest first."""
        return [handoff_package(row) for row in self.handoffs]

    @property
    def outcome_kind(self) -> str:
        """The task's kind as the metrics count it (:mod:`retrylens.analytics.definitions`):
        a success after retries is ``successful_with_retry``, apart from a clean first-try
        ``successful_without_retry``; ``""`` while it runs."""
        if not self.outcome:
            return ""
        retried = max((a.attempt for a in self.attempts), default=1) >= FIRST_RETRY_ATTEMPT
        return ("successful" if self.outcome == "succeeded" else "failed") + ("_with_retry" if retried else "_without_retry")

    @property
    def cost_usd(self) -> float:
        return sum(a.cost_usd for a in self.attempts)

    @property
    def tokens(self) -> int:
        return sum(a.tokens for a in self.attempts)


def _json(value: Any) -> Any:
    """A stored JSON column (a string from the store; already decoded by the API)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value) if value else None
    except ValueError:
        return None


def _absorb(attempt: Attempt, row: dict[str, Any]) -> None:
    kind = row["kind"]
    attempt.phase = row.get("phase") or attempt.phase
    attempt.dependency = row.get("dependency") or attempt.dependency
    attempt.policy = attempt.policy or ":".join(p for p in (row.get("policy_id"), row.get("policy_version")) if p)
    if kind == "attempt_started":
        attempt.started = row["ts"]
    if kind in ("attempt_failed", "attempt_succeeded"):
        attempt.ended = row["ts"]
        attempt.status = "failed" if kind == "attempt_failed" else "succeeded"
        attempt.latency_ms = int(row.get("latency_ms") or 0)
        attempt.tokens += int(row.get("tokens_in") or 0) + int(row.get("tokens_out") or 0)
        attempt.cost_usd += float(row.get("cost_usd") or 0.0)
        attempt.degraded = attempt.degraded or bool(row.get("degraded"))
    if row.get("error_type"):
        attempt.error_type = row["error_type"]
        attempt.error_message = row.get("error_message") or attempt.error_message
        attempt.error_code = row.get("error_code") or attempt.error_code
    if row.get("decision") not in (None, "", "none"):
        attempt.decision = row["decision"]
        attempt.decision_reason = row.get("decision_reason") or ""
        attempt.backoff_ms = int(row.get("backoff_ms") or 0)
    if row.get("shadow_decision"):
        attempt.shadow_decision = row["shadow_decision"]
    snapshot = _json(row.get("context_snapshot"))
    if isinstance(snapshot, dict):
        attempt.message_count = int(snapshot.get("message_count") or row.get("context_message_count") or 0)
        attempt.token_count = int(snapshot.get("token_count") or row.get("context_token_count") or 0)
        attempt.digests = list(snapshot.get("message_digests") or [])
        attempt.last_messages = [m for m in snapshot.get("last_messages") or [] if isinstance(m, dict)]
    attempt.pollution_score = max(attempt.pollution_score, float(row.get("pollution_score") or 0.0))
    signals = snapshot if isinstance(snapshot, dict) else {}
    for name, kind in (("trailing_errors", int), ("recent_error_share", float), ("repeated_tool_calls", int)):
        value = kind(row.get(name) or signals.get(name) or 0)  # a column, or the API's decoded snapshot
        setattr(attempt, name, max(getattr(attempt, name), value))
    effects = _json(row.get("side_effects"))
    if isinstance(effects, list):
        for effect in effects:
            if isinstance(effect, dict):
                attempt.side_effects.append({"ts": row["ts"], **effect})


def _mark_echoes(attempts: list[Attempt]) -> None:
    previous_last: str | None = None
    for attempt in attempts:
        chain = ([previous_last] if previous_last else []) + attempt.digests
        offset = len(chain) - len(attempt.digests)
        attempt.echoed_digests = [i - offset for i in range(offset, len(chain)) if i > 0 and chain[i] == chain[i - 1]]
        messages = attempt.last_messages
        attempt.echoed_messages = [
            i for i in range(1, len(messages))
            if messages[i].get("role") == "user" and messages[i - 1].get("role") == "user"
            and messages[i].get("content") == messages[i - 1].get("content")
        ]
        if attempt.digests:
            previous_last = attempt.digests[-1]


def _mark_carried_errors(attempts: list[Attempt]) -> None:
    for index, attempt in enumerate(attempts):
        text = "\n".join(str(m.get("content", "")) for m in attempt.last_messages)
        attempt.carried_from = [
            earlier.attempt for earlier in attempts[:index]
            if earlier.attempt < attempt.attempt and len(earlier.error_message) >= _MIN_ERROR_CHARS
            and earlier.error_message[:CARRY_PREFIX] in text
        ]


def build_story(project: str, task_id: str, rows: list[dict[str, Any]]) -> TaskStory:
    """Fold a task's events (any order) into attempts, oldest first."""
    story = TaskStory(project=project, task_id=task_id, events=len(rows))
    by_key: dict[tuple[int, str], Attempt] = {}
    for row in sorted(rows, key=lambda r: (r["ts"], r.get("attempt", 0))):
        story.agent = story.agent or row.get("agent_name", "")
        story.trace_id = story.trace_id or row.get("trace_id", "")
        if row["kind"] == "task_finished" or row.get("outcome"):  # or a compact first-try success
            story.outcome = row.get("outcome") or story.outcome
            story.summary = row.get("decision_reason") or story.summary
        if row["kind"] == "handoff":
            story.handoffs.append(row)
        if int(row.get("attempt") or 0) < 1 or row["kind"] in _TASK_KINDS:
            continue
        key = (int(row["attempt"]), row["correlation_id"])
        if key not in by_key:
            by_key[key] = Attempt(attempt=key[0], correlation_id=key[1])
        _absorb(by_key[key], row)
    story.attempts = sorted(by_key.values(), key=lambda a: (a.started or a.ended or datetime.min, a.attempt))
    _mark_echoes(story.attempts)
    _mark_carried_errors(story.attempts)
    return story


def attempt_rows(story: TaskStory) -> list[dict[str, Any]]:
    """One table row per attempt: the timeline at a glance."""
    return [
        {
            "attempt": a.attempt, "phase": a.phase, "started": a.started, "status": a.status,
            "error_type": a.error_type, "error": a.error_message[:120], "decision": a.decision,
            "reason": a.decision_reason, "stopped_by": stopping_budget(a.decision_reason) or "",
            "backoff_ms": a.backoff_ms, "context_msgs": a.message_count,
            "context_tokens": a.token_count, "pollution": round(a.pollution_score, 3),
            "trailing_errors": a.trailing_errors, "recent_error_share": round(a.recent_error_share, 3),
            "repeated_tool_calls": a.repeated_tool_calls,
            "side_effects": len(a.side_effects), "cost_usd": round(a.cost_usd, 6),
            "warnings": "; ".join(a.warnings),
        }
        for a in story.attempts
    ]
