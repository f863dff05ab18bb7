"""A governed call's first attempt, before anything needs task state: the fast path.

Most governed calls succeed on their first attempt, and for those the governor has
nothing to decide. So :meth:`Governor.call` / ``acall`` start with a :class:`FirstTry`
instead of a :class:`~retrylens.sdk.core.run.TaskRun`: it notes the start time, the
function runs, and on success ONE event is emitted — ``attempt_succeeded`` in the
*compact form* (attempt 1, ``outcome='succeeded'``, the task's ``input_features`` and
fingerprint; see :mod:`retrylens.schemas.event`), built from a per-call-site template of
the constant fields without validation (a test proves the template valid, and the
consumer validates every message anyway).

The moment the attempt needs more — it fails, or the function asks for
``current_run()`` (a side effect, a completed step, a cancellation check) —
:meth:`FirstTry.materialize` builds the real TaskRun as if it had existed from the start
(task_started and attempt_started carry the real start time). That run is in compact
mode too (:mod:`~retrylens.sdk.core.run`): a success with nothing else recorded is still one
event, while a failure or a side effect releases the full event sequence.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from retrylens.schemas.taxonomy import EventKind, TaskOutcome

from .events import _construct, _defaults
from .ids import uuid4_from_int
from .usage import usage_of

_PLAIN = (str, int, float, bool, type(None), bytes)

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from retrylens.schemas import AgentRef, RetryEvent

    from .chain import ChainRegistry
    from .events import EventFactory
    from .ids import IdSource
    from .policy import RetryPolicy
    from .run import TaskRun
    from .state import Attempt


class Host(Protocol):
    """What a :class:`FirstTry` uses of its governor (a protocol: no import of it here)."""

    project: str
    clock: Callable[[], float]
    events: EventFactory
    ids: IdSource
    chains: ChainRegistry

    @property
    def policy(self) -> RetryPolicy: ...
    def emit(self, event: RetryEvent) -> None: ...
    def observe_success(self, dependency: str) -> None: ...
    def _open(
        self,
        goal: str,
        *,
        agent: str | AgentRef,
        task_id: str | None,
        phase: str,
        dependency: str,
        compact: bool,
        ts: datetime | None,
        source_policy: RetryPolicy | None,
    ) -> TaskRun: ...


class FirstTry:
    """The first attempt of a governed call, with no task state until it is needed."""

    __slots__ = (
        "g",
        "goal",
        "agent",
        "phase",
        "dependency",
        "task_id",
        "template",
        "started",
        "run",
        "attempt",
        "source_policy",
    )

    def __init__(
        self,
        governor: Host,
        goal: str,
        agent: str | AgentRef,
        phase: str,
        dependency: str,
        task_id: str | None,
    ) -> None:
        self.g = governor
        self.goal, self.agent, self.phase, self.dependency, self.task_id = (
            goal,
            agent,
            phase,
            dependency,
            task_id,
        )
        name, role = (agent, "") if isinstance(agent, str) else (agent.name, agent.role)
        policy = self.source_policy = governor.policy  # what this attempt runs under
        if role:
            policy = policy.for_role(role)
        # Looked up before the function runs, as the full path reads policy and agent then.
        self.template = compact_template(
            governor.project, goal, name, role, phase, dependency, policy.id, policy.version
        )
        self.run: TaskRun | None = None
        self.attempt: Attempt | None = None
        self.started = governor.clock()

    def materialize(self) -> tuple[TaskRun, Attempt]:
        """The TaskRun and Attempt this call would have had from the start (built once)."""
        if self.run is None or self.attempt is None:
            g = self.g
            ts = g.events.wall() - timedelta(seconds=max(0.0, g.clock() - self.started))
            run = g._open(
                self.goal,
                agent=self.agent,
                task_id=self.task_id,
                phase=self.phase,
                dependency=self.dependency,
                compact=True,
                ts=ts,
                source_policy=self.source_policy,
            )
            self.attempt = run._new_attempt(None, None, self.started, ts)
            self.run = run
        return self.run, self.attempt

    def succeed(self, result: Any = None) -> None:
        """Record the success: the compact event, or the materialized run's own ending.

        Tokens and cost are read off ``result`` when it carries a usage (see :mod:`.usage`).
        """
        if self.run is not None and self.attempt is not None:
            with self.run:  # a refused success (a coroutine dropped unawaited) ends it failed
                self.run.succeed(self.run.last_attempt or self.attempt, result)
            return
        g = self.g
        event = compact_event(g, self.template, self.task_id, self.started, result)
        if self.dependency:
            g.observe_success(self.dependency)
        g.emit(event)
        if self.task_id is not None:
            g.chains.leave(self.task_id)


def compact_event(
    g: Host,
    template: tuple[dict[str, Any], set[str]],
    task_id: str | None,
    started: float,
    result: Any = None,
) -> RetryEvent:
    """The compact event of a call site's first try that began at ``started`` and returned
    ``result`` (its usage read off it), built from the site's :func:`compact_template`.

    Also what :func:`retrylens.sdk.observe` records for a provider call answered at once.
    """
    usage = None if type(result) in _PLAIN else usage_of(result)
    latency_ms = int((g.clock() - started) * 1000)
    values, fields = template
    ids = g.ids.hex(128)  # event uuid, task, trace, root span, attempt correlation, attempt span
    ts = g.events.wall()
    values = values.copy()  # in the schema's field order, so the wire bytes are pydantic's
    values["event_id"] = uuid4_from_int(int(ids[:32], 16))
    values["ts"] = (
        ts if not ts.microsecond % 1000 else ts.replace(microsecond=ts.microsecond // 1000 * 1000)
    )
    values["task_id"] = task_id or f"task-{ids[32:48]}"
    values["trace_id"] = ids[48:80]
    values["parent_span_id"] = ids[80:96]
    values["correlation_id"] = ids[96:112]
    values["span_id"] = ids[112:128]
    values["latency_ms"] = latency_ms if latency_ms > 0 else 0
    values["side_effects"] = []
    if usage is not None:
        values["tokens_in"], values["tokens_out"] = usage.tokens_in, usage.tokens_out
        values["cost_usd"] = round(usage.cost_usd, 6)
    return _construct(values, fields)  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=1024)
def compact_template(
    project: str,
    goal: str,
    agent: str,
    role: str,
    phase: str,
    dependency: str,
    policy_id: str,
    policy_version: str,
) -> tuple[dict[str, Any], set[str]]:
    """The fields every compact event of one call site shares, and the set of all field names.

    The set is shared by the events (see ``events._construct``): pydantic never mutates a
    frozen model's ``__pydantic_fields_set__``, it copies it.

    Keyed like the governor's feature cache: agents run the same inputs a lot, and the
    features of a new input are computed once here either way.
    """
    from retrylens.schemas.event import AgentRef

    from ..text.features import task_features  # input features load with the first call site

    fingerprint, features = task_features(goal, agent, dependency, ())
    values = _defaults()  # in field order, with placeholders for the per-event fields
    values.update(
        {
            "project": project,
            "agent": AgentRef(name=agent, role=role),
            "attempt": 1,
            "phase": phase,
            "kind": EventKind.ATTEMPT_SUCCEEDED,
            "dependency": dependency,
            "input_fingerprint": fingerprint,
            "input_features": features,
            "policy_id": policy_id,
            "policy_version": policy_version,
            "outcome": TaskOutcome.SUCCEEDED,
        }
    )
    return values, set(values)


def is_compact(event: RetryEvent) -> bool:
    """Whether ``event`` is the compact form of a clean first-try success."""
    return event.kind == EventKind.ATTEMPT_SUCCEEDED and event.outcome is not None
