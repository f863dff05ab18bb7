"""Pre-flight risk check: ask the risk API before a task starts, adapt, never block.

``POST {api_url}/v1/precheck`` with :class:`PrecheckRequest`; the answer is a
:class:`PrecheckResponse`. The call has a short timeout and **fails open**: any error,
timeout or malformed answer means "no advice" and the task runs under its normal policy.
The features sent are computed by :func:`retrylens.sdk.text.features.extract_input_features`,
the same function the classifier was trained on.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from retrylens.errors import ApiError
from retrylens.schemas import ErrorType

from ..transport.client import RetryLensClient
from .policy import TaskBudget

if TYPE_CHECKING:
    from .governor import TaskRun

log = logging.getLogger(__name__)


class PrecheckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project: str
    agent: str
    task_input: str = Field(max_length=64_000)
    features: dict[str, bool | int | float | str] = Field(default_factory=dict)
    #: The task this pre-check is for: the server joins the stored pre-check to its outcome.
    task_id: str = Field(default="", max_length=128)


class Recommendation(BaseModel):
    model_config = ConfigDict(extra="ignore")

    max_attempts: int | None = Field(default=None, ge=1)
    degrade_first: bool = False
    human_review: bool = False
    #: Tighter retry caps per failure class (``{"logic": 0}``: do not retry a logic error);
    #: only ever lowers the policy's cap, and a class this SDK does not know is ignored.
    caps: dict[str, int] = Field(default_factory=dict)


class PrecheckResponse(BaseModel):
    model_config = ConfigDict(extra="ignore")

    risk: float = Field(ge=0, le=1, description=(
        "The probability that the task fails (ends failed or handed to a human), on every path: the "
        "model's calibrated score; with no model or an empty input, the input's earlier task failure rate "
        "smoothed towards the agent's, or the agent's task failure rate over the last 7 days (not its share "
        "of failed attempts, which retries inflate); 0 when nothing is known (model_status says so)."))
    model_version: str = ""
    #: ``current``, ``none: …`` (no model: the risk comes from history) or ``stale: …``.
    model_status: str = ""
    precheck_id: str = ""
    top_features: list[str] = Field(default_factory=list)
    known_bad_fingerprint: bool = False
    recommended: Recommendation = Recommendation()
    #: Each advice given, with the action and the history behind it, in words:
    #: ``[{"advice", "action", "evidence"}]``.
    advice: list[dict[str, str]] = Field(default_factory=list)
    #: The features that moved the risk most, either way: ``[{"feature", "contribution",
    #: "odds_factor", "words"}]`` (``words``: e.g. "the word 'chargeback': ×3.1 failure odds").
    reasons: list[dict[str, Any]] = Field(default_factory=list)
    #: This exact input's earlier tasks (``{"tasks", "failed_tasks", "words", "link"}``), if any.
    input_history: dict[str, Any] | None = None
    #: The nearest past failed tasks of inputs sharing this one's keywords, nearest first:
    #: ``[{"task_id", "agent", "similarity", "shared_words", "error_type", "failure_group",
    #: "known_bad", "words", "link", "group_link", ...}]``.
    similar_failures: list[dict[str, Any]] = Field(default_factory=list)


class Preflight:
    """Client of the risk API; ``adapt(run)`` applies its advice to a starting task."""

    def __init__(
        self,
        api_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 0.3,
        client: httpx.Client | None = None,
    ) -> None:
        self.api = RetryLensClient(api_url, api_key, timeout_s, http=client)
        self.failures = 0

    def check(self, request: PrecheckRequest) -> PrecheckResponse | None:
        """The API's advice, or ``None`` (fail-open) on any problem."""
        try:
            answer = self.api.precheck(
                request.project,
                request.agent,
                request.task_input,
                request.features,
                task_id=request.task_id,
            )
            return PrecheckResponse.model_validate(answer)
        except (httpx.HTTPError, ApiError, ValidationError, ValueError) as exc:
            self.failures += 1
            log.info("pre-flight check unavailable (%s); failing open", exc)
            return None

    def adapt(self, run: TaskRun) -> PrecheckResponse | None:
        s = run.state
        advice = self.check(
            PrecheckRequest(
                project=s.project,
                agent=s.agent.name,
                task_input=s.goal[:64_000],
                features=_plain(s.features),
                task_id=s.task_id[:128],
            )
        )
        if advice is None:
            return None
        apply_advice(run, advice)
        return advice


def apply_advice(run: TaskRun, advice: PrecheckResponse) -> None:
    """Lower the retry cap, degrade first, or require human review, as advised."""
    s = run.state
    rec = advice.recommended
    notes = [f"risk {advice.risk:.2f} ({advice.model_version or 'unknown model'})"]
    if rec.max_attempts is not None and rec.max_attempts < s.policy.budget.most_attempts:
        s.policy = s.policy.model_copy(
            update={
                "budget": TaskBudget(
                    **{**s.policy.budget.model_dump(), "max_attempts": rec.max_attempts}
                )
            }
        )
        notes.append(f"max_attempts {rec.max_attempts}")
    tighter = _tighter_caps(s.policy.caps, rec.caps)
    if tighter:
        s.policy = s.policy.model_copy(update={"caps": {**s.policy.caps, **tighter}})
        notes.append("caps " + ", ".join(f"{k.value} {v}" for k, v in tighter.items()))
    if rec.degrade_first:
        s.relaxed = s.degraded = True
        notes.append("degrade first")
    if rec.human_review:
        s.review_first = True  # the task stops for a person before its first attempt
        notes.append("human review before the task runs")
    if advice.known_bad_fingerprint:
        run.g.history.mark_bad(s.fingerprint, s.policy.rules.fingerprint_failure_limit)
        notes.append("known bad input")
    s.preflight_note = "; ".join(notes)


def _tighter_caps(caps: dict[ErrorType, int], advised: dict[str, int]) -> dict[ErrorType, int]:
    """The advised caps that are below the policy's, by known failure class."""
    out: dict[ErrorType, int] = {}
    for name, cap in advised.items():
        try:
            error = ErrorType(name)
        except ValueError:
            continue
        if 0 <= cap < caps.get(error, 0):
            out[error] = int(cap)
    return out


def _plain(features: dict[str, Any]) -> dict[str, bool | int | float | str]:
    return {k: v for k, v in features.items() if isinstance(v, bool | int | float | str)}
