"""``POST /v1/precheck``: the risk that a task fails or needs a human, before it starts.

Scoring uses the exact transformation the classifier was trained with:
:func:`~retrylens.sdk.text.features.extract_input_features` for the input (features the
agent sends — tools, model — are added on top) and
:func:`~retrylens.analytics.classifier.feature_dict` with the fingerprint's history as
context. The model comes from :func:`~retrylens.analytics.model_store.load_current_model`,
which re-reads the ``CURRENT`` pointer every few seconds, so a newly trained model is
used without a restart. With no model yet (or an empty input) the answer still comes
(``model_version: "none"``) and ``risk`` means what it means with a model, the probability
that the task fails: the input's task failure rate smoothed towards the agent's, or the
agent's task failure rate for an input never seen.

A pre-check sits on the agent's critical path, so nothing on it waits for ClickHouse or a
worker thread in the steady state: fingerprint history comes from an in-memory index
refreshed in the background (:mod:`.fingerprint_index`, ~10 s behind the store), every
agent's failure rate is read per project at once and refreshed in the background
(:mod:`.base_rates`, a minute behind), the model re-check reads only the ``CURRENT``
pointer on the event loop, and the model is evaluated as plain arithmetic
(:mod:`.fast_model`). The key check and the JSON body check are async dependencies: a sync
one is sent to a worker thread on every request.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from prometheus_client import Counter, Histogram
from pydantic import Field

from retrylens.analytics import explain
from retrylens.analytics.advice import advise, model_uncertainty
from retrylens.analytics.classifier import RiskContext, RiskModel, term_names
from retrylens.analytics.fingerprints import FingerprintStats
from retrylens.analytics.model_store import (
    LoadedModel,
    ModelNotFoundError,
    ModelStore,
    load_current_model,
    models_dir,
)
from retrylens.analytics.prechecks import PrecheckRow
from retrylens.analytics.similar_failures import content_words
from retrylens.config import Settings
from retrylens.sdk.core.preflight import PrecheckRequest, PrecheckResponse
from retrylens.sdk.text.features import task_features
from retrylens.sdk.text.refs import input_refs
from retrylens.store import EventStore

from .auth import Principal, not_found, principal
from .base_rates import BaseRates
from .fast_model import LinearRiskScorer, column
from .fingerprint_index import FingerprintIndex
from .precheck_bounds import (
    MAX_FEATURES,
    BoundedJSONRoute,
    FeatureName,
    FeatureValue,
    bounded_features,
)

log = logging.getLogger("retrylens.api.precheck")
router = APIRouter(prefix="/v1", tags=["precheck"], route_class=BoundedJSONRoute)

PRECHECKS = Counter("retrylens_precheck_total", "Pre-flight checks served", ["model"])
RISK = Histogram("retrylens_precheck_risk", "Risk returned by pre-flight checks",
                 buckets=(0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))

TOP_FEATURES = 5
PRIOR_WEIGHT = 2.0  # pseudo-tasks at the agent's task failure rate mixed into a fingerprint's own record
BASE_RATE_DAYS = 7
STALE_AFTER_DAYS = 30


def top_contributions(model: RiskModel, fdict: dict[str, float], top: int = TOP_FEATURES) -> list[tuple[str, float]]:
    """Features that raised this task's log-odds most (weight × value), strongest first."""
    return [(name, c) for name, _value, c in top_reasons(model, fdict, top) if c > 0]


def top_reasons(model: RiskModel, fdict: dict[str, float], top: int = TOP_FEATURES) -> list[tuple[str, float, float]]:
    """``(feature, value, effect)`` of the features of this input that moved its log-odds most, either
    way, each against its agent's typical input (:mod:`~retrylens.analytics.reasons`)."""
    coef = model.coef
    return model.reasons(fdict, lambda name: float(coef[column(name)]), top=top)


def model_status(meta: dict[str, Any], *, now: datetime | None = None) -> str:
    """``current``, or ``stale: …`` when the model is older than :data:`STALE_AFTER_DAYS` or was
    trained on another feature set than this server computes (its scores are then guesses)."""
    from retrylens.analytics.classifier import FEATURE_SET_VERSION

    trained = str(meta.get("feature_set") or "")
    if trained and trained != FEATURE_SET_VERSION:
        return f"stale: trained on feature set {trained}, this server computes {FEATURE_SET_VERSION}; retrain"
    try:
        at = datetime.fromisoformat(str(meta.get("trained_at")))
    except ValueError:
        return "current"
    age = (now or datetime.now(UTC)) - (at if at.tzinfo else at.replace(tzinfo=UTC))
    if age > timedelta(days=STALE_AFTER_DAYS):
        return f"stale: trained {age.days} days ago (more than {STALE_AFTER_DAYS}); retrain on recent history"
    return "current"


class NeedsIO(Exception):
    """Raised inside a no-I/O scoring attempt when something must be read from the store or disk."""


class RiskScorer:
    """Scores pre-check requests against one store and the current model.

    :meth:`score` with ``io=False`` answers from memory only, or raises :class:`NeedsIO`;
    the endpoint tries that on the event loop first and falls back to a worker thread,
    so the steady state pays no thread hand-off.
    """

    def __init__(self, settings: Settings, store: EventStore, *, history_refresh_s: float = 10.0,
                 base_rate_ttl_s: float = 60.0, model_check_s: float = 2.0) -> None:
        self.settings = settings
        self.store = store
        self.model_check_s = model_check_s
        self.fingerprints = FingerprintIndex(store, refresh_s=history_refresh_s)
        self.base_rates = BaseRates(store, days=BASE_RATE_DAYS, ttl_s=base_rate_ttl_s)
        self._linear: LinearRiskScorer | None = None
        self._model: LoadedModel | None = None
        self._model_checked_at = -math.inf
        self._models = ModelStore(models_dir(settings))

    def history(self, project: str, fingerprint: str, *, io: bool = True) -> FingerprintStats:
        found = self.fingerprints.lookup(project, fingerprint, io=io)
        if found is None:
            raise NeedsIO
        return found

    def current_model(self, *, io: bool = True) -> LoadedModel | None:
        """The model in force (``None`` before the first training), re-checked every ``model_check_s``.

        The re-check reads the ``CURRENT`` pointer (a few bytes of a local file, so it is done
        even with ``io=False``, on the event loop); only a pointer naming another version than
        the one in memory needs the worker thread, to load that version. Sending every re-check
        to a thread cost a thread hand-off per ``model_check_s``: the slowest pre-checks of a run."""
        now = time.monotonic()
        if now - self._model_checked_at < self.model_check_s:
            return self._model
        if not io:
            try:
                pointer = self._models.current_version()
            except OSError as exc:  # unreadable here: the worker thread's load reports it
                raise NeedsIO from exc
            if pointer != (self._model.version if self._model is not None else None):
                raise NeedsIO
            self._model_checked_at = now
            return self._model
        try:
            loaded: LoadedModel | None = load_current_model(self.settings, check_interval_s=0)
        except ModelNotFoundError:
            loaded = None
        except Exception:  # noqa: BLE001 - a broken artifact must not break pre-checks
            log.exception("cannot load the current risk model; scoring without it")
            loaded = None
        self._model, self._model_checked_at = loaded, now
        return loaded

    def _linear_for(self, model: RiskModel) -> LinearRiskScorer:
        linear = self._linear
        if linear is None or linear.model is not model:
            linear = self._linear = LinearRiskScorer(model)
        return linear

    def base_rate(self, project: str, agent: str | None, *, io: bool = True) -> float | None:
        """Failed tasks / ended tasks of this agent (``None``: of the whole project) over the last
        week (rollups), if any: every agent of a project is read at once (:mod:`.base_rates`)."""
        table = self.base_rates.table(project, io=io)
        if table is None:
            raise NeedsIO
        return table.rate(agent)

    def unknown(self, project: str, agent: str, *, io: bool = True) -> str:
        """Words for an answer scored with nothing recorded of its agent or project ('' when both
        have recent attempts): the model then reads the input alone (an agent's usual input
        size, its base rate), so the answer says so instead of passing for an informed one."""
        if self.base_rate(project, agent, io=io) is not None:
            return ""
        if self.base_rate(project, None, io=io) is None:
            return (f"project {project!r} has no recorded attempts in the last {BASE_RATE_DAYS} days: the risk "
                    "is read from the input alone")
        return (f"agent {agent!r} has no recorded attempts in project {project!r} in the last {BASE_RATE_DAYS} "
                "days: scored without its own record (its usual input size, its failure rate)")

    def score(self, request: PrecheckRequest, *, io: bool = True) -> tuple[PrecheckResponse, dict[str, Any]]:
        """The response, and details for the recent-prechecks list.

        An empty (or blank) input is not given to the model: it would read "0 lines, far fewer
        than usual" as safety. Its risk is the history's, as when no model is trained."""
        loaded = self.current_model(io=io)
        if not request.task_input.strip():
            loaded = None
        fingerprint, input_features = task_features(request.task_input, request.agent, "")
        stats = self.history(request.project, fingerprint, io=io)
        similar = self.fingerprints.similar(request.project, fingerprint, lambda: content_words(input_features),
                                            agent=request.agent, io=io)
        if similar is None:
            raise NeedsIO
        if loaded is not None:
            extra = {k: v for k, v in request.features.items()
                     if not (isinstance(v, float) and not math.isfinite(v))}
            phase = str(extra.pop("phase", "") or "")
            features = {**input_features, **extra}
            context = RiskContext(phase=phase, fingerprint_tasks=stats.tasks,
                                  fingerprint_failed_tasks=stats.tasks_failed)
            fdict = loaded.model.model_input(features, context, text=request.task_input)
            risk = self._linear_for(loaded.model).risk(fdict, prepared=True)
            reasons = top_reasons(loaded.model, fdict)
            contributions = [(name, c) for name, _v, c in reasons if c > 0]
            names = term_names(request.task_input)
            words = [explain.contribution(name, value, c, agent=request.agent, raw=features, names=names)
                     for name, value, c in reasons]
            version = loaded.version
            status = model_status(loaded.meta)
            unknown = self.unknown(request.project, request.agent, io=io)
            status = f"{status}; {unknown}" if unknown else status
        else:
            risk, contributions = self._without_model(request, stats, io=io)
            version = "none"
            status = _status_without_model(request, bool(contributions))
            why = "no model yet" if request.task_input.strip() else "empty input"
            words = [{"feature": name, "contribution": round(value, 4),
                      "words": f"{why}: {_history_words(name, request.agent)} {value:.0%}"}
                     for name, value in contributions]
        risk = min(1.0, max(0.0, risk))
        advice = advise(risk, stats, project=request.project, agent=request.agent,
                        book=loaded.meta.get("advice_book") if loaded is not None else None,
                        human_review_threshold=self.settings.human_review_threshold,
                        holdout=held_out(request.task_id, self.settings.advice_holdout_share),
                        refs=input_refs(request.task_input),
                        margin=model_uncertainty(loaded.meta) if loaded is not None else 0.0)
        known_bad = advice.known_bad
        response = PrecheckResponse(
            risk=risk, model_version=version, precheck_id=uuid.uuid4().hex, top_features=[name for name, _ in contributions],
            known_bad_fingerprint=known_bad, recommended=advice.recommendation, advice=advice.evidence,
            reasons=words, input_history=explain.input_history(stats), model_status=status,
            similar_failures=similar,
        )
        PRECHECKS.labels("model" if loaded is not None else "none").inc()
        RISK.observe(risk)
        return response, {"fingerprint": fingerprint, "contributions": contributions}

    def _without_model(self, request: PrecheckRequest, stats: FingerprintStats, *,
                       io: bool) -> tuple[float, list[tuple[str, float]]]:
        base = self.base_rate(request.project, request.agent, io=io)
        if stats.tasks:
            prior = base if base is not None else 0.0
            rate = (stats.tasks_failed + PRIOR_WEIGHT * prior) / (stats.tasks + PRIOR_WEIGHT)
            return rate, [("fingerprint_history", rate)]
        if base is not None:
            return base, [("agent_base_rate", base)]
        return 0.0, []


def _history_words(name: str, agent: str) -> str:
    if name == "agent_base_rate":
        return f"{agent}'s task failure rate over the last {BASE_RATE_DAYS} days"
    if name == "fingerprint_history":
        return f"this input's task failure rate (smoothed towards {agent}'s)"
    return name.replace("_", " ")


def _status_without_model(request: PrecheckRequest, known: bool) -> str:
    if not request.task_input.strip():
        return ("none: the input is empty, so the model has nothing to read; " +
                ("the risk is this input's and this agent's failure history" if known else
                 "nothing is known of this agent either; risk 0 means unknown, not safe"))
    if known:
        return "none: no risk model is trained yet (`retrylens train`); the risk is this input's and this agent's " \
               "failure history"
    return ("none: no risk model is trained yet and nothing is known of this input or agent; risk 0 means unknown, "
            "not safe")


#: A visible character: what a project or agent name needs (an event without either is refused).
_NAMED = r"\S"


class PrecheckBody(PrecheckRequest):
    """The SDK's request as the route takes it, with its refusal of a blank project or agent and
    its bounds on ``features`` (:mod:`.precheck_bounds`) in the schema (OpenAPI ``pattern``,
    ``maxProperties``), so clients and fuzzers know them; ``_blank_names`` refuses
    it with a message naming the field (the SDK's own model stays lax: a governor whose agent
    has no name must still run its task, failing the pre-check open)."""

    project: str = Field(json_schema_extra={"pattern": _NAMED})
    agent: str = Field(json_schema_extra={"pattern": _NAMED})
    features: dict[FeatureName, FeatureValue] = Field(default_factory=dict, max_length=MAX_FEATURES)


def _blank_names(body: PrecheckRequest) -> None:
    """A blank project or agent can match nothing recorded (events require both): a 422 naming it."""
    blank = [name for name in ("project", "agent") if not getattr(body, name).strip()]
    if blank:
        raise RequestValidationError([{"loc": ("body", name), "msg": "must not be empty", "type": "value_error"}
                                      for name in blank])


@router.post("/precheck", response_model=PrecheckResponse, summary="Risk of a task before it starts",
             dependencies=[Depends(bounded_features)])
async def precheck(body: PrecheckBody, request: Request, who: Principal = Depends(principal)) -> Response:
    """The answer as :class:`PrecheckResponse` JSON, serialised once here: returned as a model,
    FastAPI would validate it against ``response_model`` and serialise it again (the model stays
    declared for the OpenAPI schema; the bytes are the ones it would send)."""
    _blank_names(body)
    if not who.can_read(body.project):
        raise not_found(body.project)
    scorer: RiskScorer = request.app.state.scorer
    try:
        response, details = scorer.score(body, io=False)  # from memory, on the event loop
    except NeedsIO:
        response, details = await run_in_threadpool(scorer.score, body)
    details["precheck_id"] = response.precheck_id
    request.app.state.precheck_log.add(stored_row(body, response, details))
    return Response(response.model_dump_json(), media_type="application/json")


def advice_kinds(response: PrecheckResponse) -> list[str]:
    """The advice of an answer as kind names (what the model page and the effect tables group by):
    the kinds the advice book gave, each once (human review's cap of one attempt is part of it);
    kinds withheld from this task or retired are not given."""
    return list(dict.fromkeys(a["advice"] for a in response.advice
                              if a.get("advice") and a.get("status", "given") == "given"))


def held_out(task_id: str, share: float) -> bool:
    """Whether this task is one of the ``share`` the advice is withheld from (the control group of
    :mod:`~retrylens.analytics.advice_effects`): a hash of the task id, so the same tasks every
    run; a pre-check without a task id can never be judged, so it is never held out."""
    if not task_id or share <= 0:
        return False
    digest = hashlib.sha256(f"advice-holdout:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def stored_row(body: PrecheckRequest, response: PrecheckResponse, details: dict[str, Any]) -> PrecheckRow:
    """The row :class:`~.precheck_log.PrecheckLog` stores for one answered pre-check."""
    return PrecheckRow(
        precheck_id=response.precheck_id, ts=datetime.now(UTC), project=body.project, agent=body.agent,
        task_id=body.task_id, input_fingerprint=details["fingerprint"], risk=response.risk,
        model_version=response.model_version, known_bad=response.known_bad_fingerprint,
        advice=tuple(advice_kinds(response)), max_attempts=response.recommended.max_attempts or 0,
        explanation={"top_features": response.reasons, "advice": response.advice,
                     "input_history": response.input_history, "similar_failures": response.similar_failures},
    )
