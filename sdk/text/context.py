"""Context hygiene: clean attempt contexts, echo removal, pollution score, bounded snapshots.

A failed attempt's raw output and error text are the worst things to feed the next
attempt: in real agent traces an errored tool call is followed by another error on the
same tool 58 % of the time versus 0.2 % after a success (../shared/data/agent_traces).
So every attempt starts from a snapshot — the clean base context, the facts verified so
far and at most a one-line failure summary — never from the failed attempt's history.

Messages are plain dicts: ``{"role": ..., "content": ...}`` plus optional ``"tool"`` and
``"args"`` for tool calls.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retrylens.schemas.limits import MAX_LAST_MESSAGES, MAX_MESSAGE_CHARS, MAX_MESSAGE_DIGESTS

from .features import normalise_input
from .sanitizer import redact

if TYPE_CHECKING:
    from retrylens.schemas import ContextSnapshot

Message = dict[str, Any]

#: The "last N messages" window of :func:`recent_error_share`: the tail an agent's next
#: model call reads most closely (about two or three tool round-trips).
RECENT_WINDOW = 10

_ERROR_MARKERS = (
    "traceback (most recent call last)",
    "error:",
    "exception",
    "failed:",
    "errorcode",
    "status 5",
    "429",
)


def digest(message: Message) -> str:
    """Stable 16-hex digest of a message's role, tool and normalised content."""
    get = message.get
    return _digest(str(get("role", "")), str(get("tool", "")), str(get("content", "")))


@functools.lru_cache(maxsize=4096)
def _digest(role: str, tool: str, content: str) -> str:
    return hashlib.sha256(f"{role}|{tool}|{normalise_input(content)}".encode()).hexdigest()[:16]


def estimate_tokens(messages: Iterable[Message]) -> int:
    """About four characters per token, the usual rule of thumb for English text."""
    return sum(len(str(m.get("content", ""))) for m in messages) // 4 + 4 * sum(1 for _ in messages)


def drop_echoed_input(
    history: Sequence[Message], user_input: str
) -> tuple[list[Message], list[Message]]:
    """Remove copies of the current user message from loaded ``history``.

    The "save, then read history, then append the input again" bug leaves the input in
    the history *and* appended as the new turn; the model then answers it twice or treats
    it as a repeated request. Returns (kept, dropped).
    """
    if not history:
        return [], []
    target = normalise_input(user_input)
    kept: list[Message] = []
    dropped: list[Message] = []
    for message in history:
        if (
            message.get("role") == "user"
            and normalise_input(str(message.get("content", ""))) == target
        ):
            dropped.append(message)
        else:
            kept.append(message)
    return kept, dropped


def pollution_score(messages: Sequence[Message]) -> float:
    """0 (clean) … 1 (polluted): error text carried, identical tool calls repeated, duplicates.

    The mean of three shares, each in [0, 1]: messages carrying error text, tool calls
    identical to an earlier one, and messages that duplicate an earlier message.
    """
    return _pollution(messages, [digest(m) for m in messages], _error_flags(messages))


def digests_and_pollution(messages: Sequence[Message]) -> tuple[list[str], float]:
    """Each message's :func:`digest` and the context's :func:`pollution_score`, in one pass.

    Memoised on :func:`content_key` for small contexts: every attempt of a task (and every
    task of an agent) starts from the same clean context again.
    """
    key = content_key(messages)
    if sum(len(part[2]) for part in key) > _MEMO_CHARS:
        return _digests_and_pollution(messages)
    found = _DIGESTS.get(key)
    if found is None:
        found = _digests_and_pollution(messages)
        if len(_DIGESTS) >= _MEMO_SIZE:
            _DIGESTS.clear()
        _DIGESTS[key] = found
    return list(found[0]), found[1]  # the caller keeps the list: a copy of the memo's


def _digests_and_pollution(messages: Sequence[Message]) -> tuple[list[str], float]:
    digests = [digest(m) for m in messages]
    return digests, _pollution(messages, digests, _error_flags(messages))


_MEMO_SIZE = 512
_MEMO_CHARS = 8_192  # larger contexts are not memoised: the key keeps their text
_DIGESTS: dict[tuple[tuple[Any, ...], ...], tuple[list[str], float]] = {}


def _pollution(messages: Sequence[Message], digests: Sequence[str], errors: Sequence[bool]) -> float:
    """:func:`pollution_score` from the messages' digests and error flags (computed once)."""
    if not messages:
        return 0.0
    n = len(messages)
    calls = [(m.get("tool"), repr(m.get("args"))) for m in messages if m.get("tool")]
    repeated_calls = len(calls) - len(set(calls))  # each call beyond the first of its kind
    duplicates = n - len(set(digests))
    error_share = min(1.0, 3.0 * sum(errors) / n)
    repeat_share = min(1.0, 2.0 * repeated_calls / max(1, len(calls)))
    dup_share = min(1.0, 3.0 * duplicates / n)
    return round(min(1.0, (error_share + repeat_share + dup_share) / 3.0), 4)


def trailing_errors(messages: Sequence[Message]) -> int:
    """How many messages at the end of the context, back to back, carry error text.

    The governor's own one-line failure note (``summary``) is transparent: it neither
    counts nor ends the run of errors before it.
    """
    return _trailing(messages, _error_flags(messages))


def _trailing(messages: Sequence[Message], errors: Sequence[bool]) -> int:
    run = 0
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("summary"):
            continue
        if not errors[i]:
            break
        run += 1
    return run


def recent_error_share(messages: Sequence[Message], window: int = RECENT_WINDOW) -> float:
    """Share of the last ``window`` messages (:data:`RECENT_WINDOW`) that carry error text."""
    recent = list(messages)[-window:] if window > 0 else []
    if not recent:
        return 0.0
    return round(sum(_error_flags(recent)) / len(recent), 4)


def tool_call_digest(name: str, args: Any = None) -> str:
    """16-hex digest of a tool call: its name and its arguments in canonical JSON.

    Arguments given as a JSON text are parsed first, so ``'{"b":1,"a":2}'`` and
    ``{"a": 2, "b": 1}`` are the same call; anything JSON cannot hold is compared by ``str``.
    """
    if isinstance(args, str | bytes):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return hashlib.sha256(f"{name}\x00{canonical}".encode()).hexdigest()[:16]


def repeated_calls(digests: Sequence[str]) -> int:
    """Tool calls identical to the call immediately before them (same name, same arguments)."""
    return sum(1 for before, after in zip(digests, digests[1:], strict=False) if before == after)


def _carries_error(message: Message) -> bool:
    if message.get("summary"):
        return False  # the governor's own one-line, redacted failure note
    if message.get("error"):
        return True
    return _error_text(str(message.get("content", "")))


def _error_flags(messages: Iterable[Message]) -> list[bool]:
    return [_carries_error(m) for m in messages]


@functools.lru_cache(maxsize=4096)
def _error_text(content: str) -> bool:
    """Whether ``content`` reads as error text (memoised: contexts repeat across attempts)."""
    text = content.casefold()
    return any(marker in text for marker in _ERROR_MARKERS)


def snapshot(
    messages: Sequence[Message],
    *,
    previous: Sequence[str] | None = None,
    last: int = 3,
    tool_calls: Sequence[str] = (),
) -> ContextSnapshot:
    """A bounded, redacted snapshot; with ``previous`` digests, only what changed (a delta).

    The loop and pollution signals always describe the whole context (a delta too):
    trailing error messages, the error share of the last :data:`RECENT_WINDOW` messages,
    and the attempt's ``tool_calls`` digests (:func:`tool_call_digest`) that repeat the
    call just before them.
    """
    from retrylens.schemas.event import ContextMessage, ContextSnapshot

    values = snapshot_fields(messages, previous=previous, last=last, tool_calls=tool_calls)
    values["last_messages"] = [
        ContextMessage(role=role, content=content) for role, content in values["last_messages"]
    ]
    return ContextSnapshot(**values)


def content_key(messages: Sequence[Message]) -> tuple[tuple[Any, ...], ...]:
    """Everything of ``messages`` that :func:`snapshot_fields` reads, as a hashable key.

    Equal keys give equal snapshots, so a snapshot can be memoised on it (an agent's
    contexts repeat across attempts and tasks).
    """
    return tuple(
        [
            (
                str(m.get("role", "")),
                repr(tool := m.get("tool", "")),  # "" and None digest differently
                str(m.get("content", "")),
                bool(m.get("summary")),
                bool(m.get("error")),
                repr(m.get("args")) if tool else None,
            )
            for m in messages
        ]
    )


def snapshot_fields(
    messages: Sequence[Message],
    *,
    previous: Sequence[str] | None = None,
    last: int = 3,
    tool_calls: Sequence[str] = (),
) -> dict[str, Any]:
    """:func:`snapshot`'s fields, already bounded, with ``last_messages`` as (role, content).

    One pass computes each message's digest and error flag for every signal, so the
    governor's event factory can build the snapshot without re-validating it.
    """
    digests = [digest(m) for m in messages]
    errors = _error_flags(messages)
    all_digests = digests
    shown: Sequence[Message] = messages
    is_delta = previous is not None
    if is_delta:
        before = set(previous or ())
        changed = [i for i, d in enumerate(digests) if d not in before]
        digests = [digests[i] for i in changed]
        shown = [messages[i] for i in changed]
    tail = (
        [
            (
                str(m.get("role", ""))[:128],
                redact(str(m.get("content", "")), limit=MAX_MESSAGE_CHARS),
            )
            for m in list(shown)[-min(last, MAX_LAST_MESSAGES) :]
        ]
        if last
        else []
    )
    recent = errors[-RECENT_WINDOW:]
    return {
        "message_count": len(messages),
        "token_count": estimate_tokens(messages),
        "message_digests": digests[-MAX_MESSAGE_DIGESTS:],
        "last_messages": tail,
        "pollution_score": _pollution(messages, all_digests, errors),
        "is_delta": is_delta,
        "trailing_errors": _trailing(messages, errors),
        "recent_error_share": round(sum(recent) / len(recent), 4) if recent else 0.0,
        "repeated_tool_calls": repeated_calls(tool_calls),
    }


@dataclass
class ContextBuilder:
    """Builds each attempt's context from a clean base; records what was kept or dropped."""

    base: list[Message]
    facts: list[str] = field(default_factory=list)
    dropped: list[Message] = field(default_factory=list)

    @classmethod
    def for_input(
        cls, user_input: str, *, system: str = "", history: Sequence[Message] = ()
    ) -> ContextBuilder:
        kept, dropped = drop_echoed_input(history, user_input)
        base = ([{"role": "system", "content": system}] if system else []) + kept
        base.append({"role": "user", "content": user_input})
        return cls(base=base, dropped=dropped)

    def rebuild(self) -> list[Message]:
        """Drop from the base what pollutes it: messages carrying error text and copies of an
        earlier message (the system prompt and the current input always stay). Returns what
        was dropped (also added to :attr:`dropped`); the governor calls it when a context's
        :func:`pollution_score` reaches ``rules.pollution_rebuild_threshold``."""
        kept: list[Message] = []
        removed: list[Message] = []
        seen: set[str] = set()
        last = len(self.base) - 1
        for i, message in enumerate(self.base):
            essential = i == last or (i == 0 and message.get("role") == "system")
            if not essential and (_carries_error(message) or digest(message) in seen):
                removed.append(message)
                continue
            seen.add(digest(message))
            kept.append(message)
        self.base = kept
        self.dropped.extend(removed)
        return removed

    def add_fact(self, fact: str) -> None:
        """A verified result of a completed sub-step, carried into later attempts."""
        if fact not in self.facts:
            self.facts.append(fact)

    def build(
        self, *, failure_summary: str | None = None, patch: str | None = None, relaxed: bool = False
    ) -> list[Message]:
        """Base + verified facts + at most one failure line + an optional prompt patch."""
        messages = [dict(m) for m in self.base]
        notes = []
        if self.facts:
            notes.append("Verified so far: " + "; ".join(self.facts))
        if failure_summary:
            notes.append(f"Note: the previous try did not succeed ({failure_summary}).")
        if patch:
            notes.append(patch)
        if relaxed:
            notes.append("A plain-text answer is acceptable; it will be post-processed.")
        if notes:
            messages.append({"role": "system", "content": " ".join(notes), "summary": True})
        return messages
