"""Whether a newly trained risk model may replace the one in force: judged on recent held-out tasks.

Why: every ``retrylens train`` (and every demo or train against a live server) made its model
current, so a retrained model whose held-out AUC was 0.58 replaced one at 0.83 with no check.
Here the candidate and the current model score the same recent held-out tasks (the last
``test_share`` of the training window, which the candidate never saw) and the candidate
becomes current only if its Brier score is no worse than the current's (a proper score: it
judges ranking and calibration at once) up to :data:`BRIER_TOLERANCE`; both figures, with
ROC-AUC beside them, are in the answer. Otherwise it is saved as a candidate (``force``
overrides). A current model of another feature set cannot read today's features, so it is
replaced (and the answer says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from . import classifier as clf
from .model_store import LoadedModel

#: Brier score the candidate may lose to the current model and still be promoted (noise on a few hundred tasks).
BRIER_TOLERANCE = 0.002


@dataclass(frozen=True)
class Promotion:
    promoted: bool
    reason: str
    held_out_tasks: int
    candidate: dict[str, float | None]
    current: dict[str, float | None] | None = None
    current_version: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _figures(labels: Sequence[int], probabilities: Sequence[float]) -> dict[str, float | None]:
    ev = clf.evaluate(labels, probabilities)
    return {"brier": round(ev.brier, 5), "roc_auc": None if ev.roc_auc is None else round(ev.roc_auc, 4)}


def judge(candidate: clf.RiskModel, current: LoadedModel | None, rows: Sequence[dict[str, float]],
          labels: Sequence[int], *, force: bool = False) -> Promotion:
    """Candidate against the model in force on the held-out ``rows`` (:func:`~.classifier.feature_dict` output)."""
    return judge_scores(candidate.predict_proba(rows).tolist() if rows else [], current, rows, labels, force=force)


def judge_scores(candidate_probabilities: Sequence[float], current: LoadedModel | None,
                 rows: Sequence[dict[str, float]], labels: Sequence[int], *, force: bool = False,
                 held_out: str = "recent held-out tasks") -> Promotion:
    """As :func:`judge`, from the candidate's probabilities on ``rows`` already computed.

    The trace-file road has no time order to hold the last tasks out by; its candidate is
    judged by its out-of-fold probabilities (each task scored by a fold that did not train
    on it), ``held_out`` says so in the reason.
    """
    mine = _figures(labels, candidate_probabilities) if rows else {"brier": None, "roc_auc": None}
    if current is None:
        return Promotion(True, "no model in force", len(rows), mine)
    trained = str(current.meta.get("feature_set") or "")
    if trained != clf.FEATURE_SET_VERSION:
        return Promotion(True, f"the model in force ({current.version}) was trained on feature set {trained or '?'}, "
                         f"this server computes {clf.FEATURE_SET_VERSION}", len(rows), mine,
                         current_version=current.version)
    if not rows:
        return Promotion(force, "forced: no held-out task to judge on" if force else "no held-out task to judge on",
                         0, mine, current_version=current.version)
    theirs = _figures(labels, current.model.predict_proba(rows))
    better = mine["brier"] is not None and theirs["brier"] is not None and mine["brier"] <= theirs["brier"] + BRIER_TOLERANCE
    figures = f"Brier {mine['brier']} vs {theirs['brier']} on {len(rows)} {held_out}"
    if better:
        reason = f"no worse than {current.version}: {figures}"
    elif force:
        reason = f"forced although worse than {current.version}: {figures}"
    else:
        reason = f"worse than {current.version} ({figures}): kept as a candidate; --force makes it current"
    return Promotion(better or force, reason, len(rows), mine, theirs, current.version)
