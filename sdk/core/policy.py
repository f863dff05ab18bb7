"""The retry policy: small typed parts, loaded from a file, a dict or the environment.

A policy says how far the governor may go for each failure class, how long it waits, when
it degrades, what a task may spend, how the fleet protects a struggling dependency, and
who may retry at all (the kill switch). Every event carries ``policy_id``/``policy_version``
so that a decision can always be traced to the rules that made it.

Attempt caps count *retries caused by a failure class*: ``logic: 1`` means one retry
(with a rebuilt context) after a logic error, ``context_overflow: 0`` means no plain retry
(only a degradation helps). The task budget bounds *all* attempts whatever the classes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError, model_validator

from retrylens.errors import PolicyError
from retrylens.schemas.taxonomy import ErrorType

POLICY_ENV = "RETRYLENS_POLICY"
POLICY_FILE_ENV = "RETRYLENS_POLICY_FILE"
#: shadow candidates parsed per policy object (``RetryPolicy.candidate``), by ``id``
_CANDIDATES: dict[int, tuple[RetryPolicy, RetryPolicy]] = {}
_CANDIDATES_KEPT = 64

DEFAULT_CAPS: dict[ErrorType, int] = {
    ErrorType.TIMEOUT: 3,
    ErrorType.NETWORK: 3,
    ErrorType.RATE_LIMIT: 3,
    ErrorType.SERVER_ERROR: 3,
    ErrorType.VALIDATION: 2,
    ErrorType.SCHEMA_MISMATCH: 2,
    ErrorType.LOGIC: 1,
}

DEFAULT_RETRYABLE: frozenset[ErrorType] = frozenset(
    {
        ErrorType.TIMEOUT,
        ErrorType.NETWORK,
        ErrorType.RATE_LIMIT,
        ErrorType.SERVER_ERROR,
        ErrorType.VALIDATION,
        ErrorType.SCHEMA_MISMATCH,
        ErrorType.LOGIC,
        ErrorType.CONTEXT_OVERFLOW,
        ErrorType.TOOL_ERROR,
        ErrorType.UNKNOWN,
    }
)


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BackoffPolicy(_Part):
    """Exponential backoff: ``base_ms * 2**(n-1)`` capped at ``cap_ms``, jittered."""

    base_ms: int = Field(default=500, ge=0)
    cap_ms: int = Field(default=8_000, ge=0)
    jitter: float = Field(default=0.3, ge=0.0, le=1.0, description="± share of the delay")
    full_jitter: bool = Field(default=False, description="uniform in [0, delay] (AWS full jitter)")
    honour_retry_after: bool = True
    max_retry_after_ms: int = Field(default=60_000, ge=0)


#: The task retry allowance's fields (see :class:`TaskBudget`).
ALLOWANCE_FIELDS = ("retries", "retries_per_step", "max_retries")


class TaskBudget(_Part):
    """What one task (with all its sub-agents) may spend. ``None`` means unbounded.

    Retries are a *retry allowance* that grows with the work the task completes:
    ``retries`` for any task, plus ``retries_per_step`` for each completed step
    (``TaskRun.step`` / ``complete_step``), never more than ``max_retries``. A long task
    earns the retries its extra calls need, and a runaway one still stops at the ceiling
    (gRPC's retry throttling likewise bounds retries as a share of successes). Tokens,
    money and the deadline stay absolute. The defaults are measured
    (``bench/budget_steps.py``, bench/RESULTS.md): a share below one retry per step stops
    a task that fails on every call after a few steps, while the ceiling, not the share,
    bounds a long task with occasional faults.

    ``max_attempts`` is the older fixed count of attempts per task. A budget that sets it
    and none of the allowance fields keeps that meaning exactly: its allowance is
    ``max_attempts - 1`` retries whatever the steps. Set with the allowance fields, it
    is an extra absolute cap on attempts (pre-flight advice lowers it that way).
    """

    max_attempts: int | None = Field(default=None, ge=1)
    retries: int = Field(default=4, ge=0, description="retries any task may spend")
    retries_per_step: float = Field(
        default=1.0, ge=0, le=100, description="retries earned by each completed step"
    )
    max_retries: int = Field(default=20, ge=0, description="the allowance's ceiling")
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    deadline_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="wrap")
    @classmethod
    def _fixed_attempts(cls, data: Any, handler: Any) -> Any:
        """An old budget (``max_attempts`` alone) keeps its fixed meaning: no earned retries."""
        budget = handler(data)
        if (
            isinstance(data, dict)
            and budget.max_attempts is not None
            and not any(name in data for name in ALLOWANCE_FIELDS)
        ):
            fixed = budget.max_attempts - 1
            budget = handler(
                {**data, "retries": fixed, "retries_per_step": 0.0, "max_retries": fixed}
            )
        return budget

    @model_validator(mode="after")
    def _ceiling_above_base(self) -> TaskBudget:
        if self.max_retries < self.retries:
            raise ValueError(
                f"max_retries ({self.max_retries}) is below retries ({self.retries}): the "
                "ceiling bounds the allowance, so it must be at least the base"
            )
        return self

    def allowance(self, steps: int) -> int:
        """Retries a task may spend after completing ``steps`` steps (``steps_allowance``)."""
        return steps_allowance(self.retries, self.retries_per_step, self.max_retries, steps)

    @property
    def most_attempts(self) -> int:
        """The most attempts any task may make under this budget (ceiling or fixed count)."""
        ceiling = self.max_retries + 1
        return min(ceiling, self.max_attempts) if self.max_attempts is not None else ceiling


def steps_allowance(base: int, per_step: float, ceiling: int, steps: int) -> int:
    """``base + floor(per_step * steps)``, at most ``ceiling``: the one formula (the
    vectorised replay's twin repeats it; a test holds them equal)."""
    return min(ceiling, base + int(per_step * max(0, steps) + 1e-9))


class FleetBudgetPolicy(_Part):
    """gRPC retry throttling per dependency: retries stop while tokens ≤ max/2.

    Each failure costs one token, each success earns ``ratio``; so retries are only
    allowed while failures stay below roughly ``ratio`` of recent calls (the SRE book's
    10 % rule).
    """

    enabled: bool = True
    max_tokens: float = Field(default=100.0, gt=0)
    ratio: float = Field(default=0.1, gt=0, le=1)


class BreakerPolicy(_Part):
    """Circuit breaker per dependency over the last ``window`` calls."""

    enabled: bool = True
    window: int = Field(default=20, ge=1)
    min_calls: int = Field(default=10, ge=1)
    failure_ratio: float = Field(default=0.5, gt=0, le=1)
    open_s: float = Field(default=30.0, gt=0)
    half_open_probes: int = Field(default=1, ge=1)


class RulesPolicy(_Part):
    """Failure-intelligence rules (history, progress, loops)."""

    fingerprint_failure_limit: int = Field(default=3, ge=1)
    extra_try_on_type_change: bool = True
    same_phase_limit: int = Field(default=2, ge=1)
    pollution_rebuild_threshold: float = Field(default=0.2, ge=0, le=1)
    max_degradations: int = Field(default=2, ge=0)
    handoff_when_stopped: bool = True


class KillSwitch(_Part):
    """Operator switch: no automatic retries for a whole project or named agents."""

    project: bool = False
    agents: frozenset[str] = frozenset()


class ShadowPolicy(_Part):
    """A candidate evaluated beside the live policy, and optional exploration."""

    candidate: dict[str, Any] | None = None
    exploration: float = Field(default=0.0, ge=0.0, le=0.5)
    explore_stops: float = Field(
        default=0.0, ge=0.0, le=0.5,
        description="where the live rules stop and the candidate would retry, take its retry with this "
        "probability: the evidence a policy report needs for a higher cap or budget")


class RoleOverride(_Part):
    """Fields that differ for one agent role; unset fields inherit the policy's."""

    caps: dict[ErrorType, int] | None = None
    phase_caps: dict[str, int] | None = None
    degrade_after: int | None = Field(default=None, ge=1)
    budget: TaskBudget | None = None
    retryable: frozenset[ErrorType] | None = None


class RetryPolicy(_Part):
    """Everything the governor needs to decide a retry."""

    id: str = Field(default="default", min_length=1, max_length=64)
    version: str = Field(default="1", min_length=1, max_length=64)
    caps: dict[ErrorType, NonNegativeInt] = Field(default_factory=lambda: dict(DEFAULT_CAPS))
    retryable: frozenset[ErrorType] = DEFAULT_RETRYABLE
    backoff: BackoffPolicy = BackoffPolicy()
    degrade_after: int = Field(default=2, ge=1, description="consecutive failures before degrading")
    phase_caps: dict[str, NonNegativeInt] = Field(default_factory=lambda: {"planning": 2})
    budget: TaskBudget = TaskBudget()
    fleet_budget: FleetBudgetPolicy = FleetBudgetPolicy()
    breaker: BreakerPolicy = BreakerPolicy()
    rules: RulesPolicy = RulesPolicy()
    kill_switch: KillSwitch = KillSwitch()
    fallbacks: dict[str, str] = Field(default_factory=dict, description="dependency → fallback")
    roles: dict[str, RoleOverride] = Field(default_factory=dict)
    shadow: ShadowPolicy = ShadowPolicy()

    def cap(self, error_type: ErrorType) -> int:
        return self.caps.get(error_type, 0)

    def for_role(self, role: str) -> RetryPolicy:
        """This policy with ``role``'s overrides applied (itself when there are none)."""
        override = self.roles.get(role)
        if override is None:
            return self
        changes: dict[str, Any] = {}
        if override.caps is not None:
            changes["caps"] = {**self.caps, **override.caps}
        if override.phase_caps is not None:
            changes["phase_caps"] = {**self.phase_caps, **override.phase_caps}
        for name in ("degrade_after", "budget", "retryable"):
            if getattr(override, name) is not None:
                changes[name] = getattr(override, name)
        return self.model_copy(update=changes)

    def is_killed(self, agent: str) -> bool:
        return self.kill_switch.project or agent in self.kill_switch.agents

    def with_overrides(self, **changes: Any) -> RetryPolicy:
        """A validated copy with top-level fields replaced (e.g. pre-flight adaptations)."""
        return parse_policy({**self.model_dump(mode="json"), **changes}, source="override")

    def candidate(self) -> RetryPolicy | None:
        """The shadow candidate as a full policy (this one with the candidate's fields).

        Parsed once per policy object (policies are frozen): the governor asks on every
        failure, and the candidate's compiled chain is then cached on the same object.
        """
        if self.shadow.candidate is None:
            return None
        hit = _CANDIDATES.get(id(self))
        if hit is not None and hit[0] is self:  # the entry holds the policy: no id reuse
            return hit[1]
        base = self.model_dump(mode="json")
        base.pop("shadow")
        parsed = parse_policy({**base, **self.shadow.candidate}, source="shadow.candidate")
        if len(_CANDIDATES) >= _CANDIDATES_KEPT:
            _CANDIDATES.clear()  # a handful of live policies at a time; reloads start afresh
        _CANDIDATES[id(self)] = (self, parsed)
        return parsed


def parse_policy(data: Any, *, source: str = "policy", strict: bool = False) -> RetryPolicy:
    """Validate ``data`` (a mapping, possibly under a top-level ``policy`` key).

    ``strict`` reads ``data`` as a JSON document whose types must be exactly those of the
    policy's JSON schema (no ``"3"`` for 3, no ``1`` for true): what the API's OpenAPI
    document declares, so that a client's schema and the server agree. Files and the
    environment stay lenient.
    """
    if isinstance(data, dict) and set(data) == {"policy"}:
        data = data["policy"]
    if not isinstance(data, dict):
        raise PolicyError(f"{source}: a policy must be a mapping", source=source)
    try:
        if strict:
            return RetryPolicy.model_validate_json(json.dumps(data), strict=True)
        return RetryPolicy.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "policy"
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'policy'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise PolicyError(
            f"invalid policy ({source}): {problems}", field=field, source=source
        ) from exc


def load_policy(path: str | Path) -> RetryPolicy:
    """Read a YAML or JSON policy file; raises :class:`PolicyError` naming the bad field."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {path}: {exc}", source=str(path)) from exc
    import yaml  # only policy files need a YAML parser

    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise PolicyError(
            f"policy file {path} is not valid YAML/JSON: {exc}", source=str(path)
        ) from exc
    return parse_policy(data or {}, source=str(path))


def policy_from_env(environ: dict[str, str] | None = None) -> RetryPolicy:
    """``RETRYLENS_POLICY_FILE`` (a path) or ``RETRYLENS_POLICY`` (inline JSON), else defaults."""
    env = os.environ if environ is None else environ
    if env.get(POLICY_FILE_ENV):
        return load_policy(env[POLICY_FILE_ENV])
    if env.get(POLICY_ENV):
        try:
            data = json.loads(env[POLICY_ENV])
        except ValueError as exc:
            raise PolicyError(f"{POLICY_ENV} is not valid JSON: {exc}", source=POLICY_ENV) from exc
        return parse_policy(data, source=POLICY_ENV)
    return RetryPolicy()
