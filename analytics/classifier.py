"""The failure classifier: task features → calibrated probability of failure or hand-off.

Features are the event's ``input_features`` (from :func:`extract_input_features`, the
function agents, training and the risk API share) plus context known before the run:
phase, hour, and the input fingerprint's earlier task failure rate. :func:`feature_dict`
turns them into one sparse dict — keywords and keyword pairs, log sizes, agent/model/tool
indicators — and a stateless :class:`FeatureHasher` maps that to columns, so that the
same code serves small in-memory training and out-of-core training over chunks.

Two fitting paths, one model type (:class:`RiskModel`):

- :func:`fit_in_memory` — logistic regression, sigmoid-calibrated by 5-fold CV;
- :func:`fit_incremental` — ``SGDClassifier.partial_fit`` chunk by chunk (the whole
  history never sits in memory), the last chunk held out to fit the calibration.

:func:`evaluate` reports ROC-AUC, PR-AUC, Brier score and a calibration table, and
:func:`baselines` the two reference models: the base rate and input length alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.feature_extraction import FeatureHasher
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.metrics import average_precision_score, brier_score_loss, roc_auc_score

FEATURE_SET_VERSION = "v1"
N_FEATURES = 2**18
FEATURE_FAMILIES = (
    "kw:<word>", "tool:<name>", "agent=<name>", "model=<name>", "language=<code>",
    "log1p(n_chars|n_words|n_lines|n_numbers|n_entities)", "has_url|has_email|has_code|is_question",
    "phase=<name>", "hour=<0-23>", "fp_seen", "fp_failure_rate",
)
C_GRID = (0.03, 0.1, 0.3, 1.0)


@dataclass(frozen=True, kw_only=True)
class RiskContext:
    """Pre-run context of a task beside its input features."""

    phase: str = ""
    hour: int | None = None
    fingerprint_tasks: int = 0
    fingerprint_failed_tasks: int = 0


def feature_dict(features: Mapping[str, Any], context: RiskContext | None = None) -> dict[str, float]:
    """The model's sparse input for one task (the single training/serving transformation).

    Keyword pairs are left to :mod:`.patterns`: as model features they overfit more than
    they help on the data we have (measured on the synthetic fleet and the real traces).
    """
    context = context or RiskContext()
    out: dict[str, float] = {}
    for key, value in features.items():
        if isinstance(value, bool):
            if value:
                out[key] = 1.0
        elif isinstance(value, int | float):
            out[key] = math.log1p(max(0.0, float(value)))
        elif value:
            out[f"{key}={value}"] = 1.0
    if context.phase:
        out[f"phase={context.phase}"] = 1.0
    if context.hour is not None:
        out[f"hour={context.hour}"] = 1.0
    if context.fingerprint_tasks:
        out["fp_seen"] = math.log1p(context.fingerprint_tasks)
        out["fp_failure_rate"] = context.fingerprint_failed_tasks / context.fingerprint_tasks
    return out


def input_length(features: Mapping[str, Any]) -> float:
    return math.log1p(float(features.get("n_chars", 0) or 0))


_HASHER = FeatureHasher(n_features=N_FEATURES, input_type="dict", alternate_sign=False)


def vectorise(dicts: Sequence[Mapping[str, float]]) -> Any:
    return _HASHER.transform(dicts)


@dataclass
class RiskModel:
    """A fitted classifier over hashed :func:`feature_dict` output."""

    calibrated: Any
    coef: np.ndarray
    intercept: float
    meta: dict[str, Any] = field(default_factory=dict)

    def predict_proba(self, dicts: Sequence[Mapping[str, float]]) -> np.ndarray:
        if not dicts:
            return np.zeros(0)
        return self.calibrated.predict_proba(vectorise(dicts))[:, 1]

    def risk(self, features: Mapping[str, Any], context: RiskContext | None = None) -> float:
        return float(self.predict_proba([feature_dict(features, context)])[0])

    def contributions(self, fdict: Mapping[str, float], top: int = 5) -> list[tuple[str, float]]:
        """Named features that moved this task's log-odds most (linear weight × value)."""
        scored = []
        for name, value in fdict.items():
            column = vectorise([{name: value}]).indices
            weight = float(self.coef[column].sum()) if len(column) else 0.0
            scored.append((name, weight * value))
        scored.sort(key=lambda item: -abs(item[1]))
        return scored[:top]


def _mean_coef(calibrated: CalibratedClassifierCV) -> tuple[np.ndarray, float]:
    estimators = [c.estimator for c in calibrated.calibrated_classifiers_]
    estimators = [getattr(e, "estimator", e) for e in estimators]  # unwrap FrozenEstimator
    coef = np.mean([e.coef_[0] for e in estimators], axis=0)
    intercept = float(np.mean([e.intercept_[0] for e in estimators]))
    return coef, intercept


def choose_c(x: Any, y: np.ndarray, grid: Sequence[float] = C_GRID) -> float:
    """Regularisation picked on the last 20 % of the (time-ordered) training rows by Brier score."""
    cut = int(len(y) * 0.8)
    if len(np.unique(y[:cut])) < 2 or len(np.unique(y[cut:])) < 2:
        return 0.1
    scores = []
    for c in grid:
        model = LogisticRegression(C=c, solver="liblinear").fit(x[:cut], y[:cut])
        scores.append(brier_score_loss(y[cut:], model.predict_proba(x[cut:])[:, 1]))
    return float(grid[int(np.argmin(scores))])


def fit_in_memory(dicts: Sequence[Mapping[str, float]], labels: Sequence[int], *, c: float | None = None) -> RiskModel:
    """Logistic regression (``c`` chosen by :func:`choose_c` unless given), 5-fold sigmoid calibration."""
    y = np.asarray(labels, dtype=int)
    _require_both_classes(y)
    x = vectorise(dicts)
    c = choose_c(x, y) if c is None else c
    folds = int(max(2, min(5, np.bincount(y, minlength=2).min())))
    base = LogisticRegression(C=c, solver="liblinear")
    calibrated = CalibratedClassifierCV(base, method="sigmoid", cv=folds).fit(x, y)
    coef, intercept = _mean_coef(calibrated)
    return RiskModel(calibrated, coef, intercept, {"estimator": f"LogisticRegression(C={c})+sigmoid(cv={folds})"})


def fit_incremental(chunks: Iterable[tuple[Sequence[Mapping[str, float]], Sequence[int]]]) -> RiskModel:
    """Out-of-core: ``partial_fit`` on each chunk in time order; the last chunk calibrates."""
    model = SGDClassifier(loss="log_loss", alpha=1e-4, random_state=0)
    held: tuple[Any, np.ndarray] | None = None
    rows = 0
    for dicts, labels in chunks:
        if held is not None:
            model.partial_fit(held[0], held[1], classes=[0, 1])
        held = (vectorise(dicts), np.asarray(labels, dtype=int))
        rows += len(labels)
    if held is None or not hasattr(model, "coef_"):
        raise ValueError("incremental training needs at least two chunks of examples")
    _require_both_classes(held[1])
    calibrated = CalibratedClassifierCV(FrozenEstimator(model), method="sigmoid").fit(*held)
    return RiskModel(calibrated, model.coef_[0].copy(), float(model.intercept_[0]),
                     {"estimator": "SGDClassifier(log_loss).partial_fit+sigmoid(last chunk)", "rows": rows})


def _require_both_classes(y: np.ndarray) -> None:
    if len(np.unique(y)) < 2:
        raise ValueError("training needs both failed and successful tasks")


@dataclass(frozen=True)
class Evaluation:
    n: int
    positives: int
    roc_auc: float | None
    pr_auc: float | None
    brier: float
    calibration: list[dict[str, float]]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(labels: Sequence[int], probabilities: Sequence[float], *, bins: int = 10) -> Evaluation:
    """ROC-AUC, PR-AUC (average precision), Brier score and a calibration table."""
    y = np.asarray(labels, dtype=int)
    p = np.clip(np.asarray(probabilities, dtype=float), 0.0, 1.0)
    both = len(np.unique(y)) == 2
    table = []
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    for b in range(bins):
        mask = which == b
        if mask.any():
            table.append({"low": float(edges[b]), "high": float(edges[b + 1]), "n": int(mask.sum()),
                          "mean_predicted": float(p[mask].mean()), "observed": float(y[mask].mean())})
    return Evaluation(
        n=int(len(y)),
        positives=int(y.sum()),
        roc_auc=float(roc_auc_score(y, p)) if both else None,
        pr_auc=float(average_precision_score(y, p)) if both else None,
        brier=float(brier_score_loss(y, p, pos_label=1)) if len(y) else float("nan"),
        calibration=table,
    )


def baselines(
    train_features: Sequence[Mapping[str, Any]], train_labels: Sequence[int],
    test_features: Sequence[Mapping[str, Any]], test_labels: Sequence[int],
) -> dict[str, Evaluation]:
    """The two reference models: the training base rate, and input length alone."""
    y = np.asarray(train_labels, dtype=int)
    base = float(y.mean())
    out = {"base_rate": evaluate(test_labels, [base] * len(test_labels))}
    x_train = np.array([[input_length(f)] for f in train_features])
    x_test = np.array([[input_length(f)] for f in test_features])
    length = LogisticRegression().fit(x_train, y)
    out["input_length"] = evaluate(test_labels, length.predict_proba(x_test)[:, 1])
    return out
