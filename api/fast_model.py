"""The risk model's prediction for one task without sklearn's per-call overhead.

A :class:`~retrylens.analytics.classifier.RiskModel` is a sigmoid-calibrated linear
classifier over hashed features. Scoring one task through sklearn costs milliseconds of
input validation, hashing and five fold-models; the arithmetic is a handful of
multiplications. :class:`LinearRiskScorer` extracts, once per model version, each fold's
weights, intercept and sigmoid calibration (``a``, ``b``) and computes

    risk = mean over folds of 1 / (1 + exp(a · (w · x + c) + b))

which is exactly what ``CalibratedClassifierCV.predict_proba`` returns for sigmoid
calibration (a test checks equality), on the row as :meth:`RiskModel.prepare` completes it
(the model's per-agent size features). Any other model shape falls back to the model's own
``predict_proba``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

import numpy as np
from sklearn.utils import murmurhash3_32

from retrylens.analytics.classifier import N_FEATURES, RiskModel


@lru_cache(maxsize=65_536)
def column(name: str) -> int:
    """The hashed column of a feature name, as ``FeatureHasher(alternate_sign=False)`` computes it."""
    return abs(murmurhash3_32(name, seed=0)) % N_FEATURES


class LinearRiskScorer:
    def __init__(self, model: RiskModel) -> None:
        self.model = model
        self.folds: list[tuple[np.ndarray, float, float, float]] | None = self._extract(model)

    @staticmethod
    def _extract(model: RiskModel) -> list[tuple[np.ndarray, float, float, float]] | None:
        try:
            calibrated = model.calibrated
            if getattr(calibrated, "method", None) != "sigmoid" or list(calibrated.classes_) != [0, 1]:
                return None
            folds = []
            for fold in calibrated.calibrated_classifiers_:
                estimator = getattr(fold.estimator, "estimator", fold.estimator)  # unwrap FrozenEstimator
                (calibrator,) = fold.calibrators
                if list(estimator.classes_) != [0, 1] or estimator.coef_.shape != (1, N_FEATURES):
                    return None
                folds.append((np.asarray(estimator.coef_[0], dtype=float), float(estimator.intercept_[0]),
                              float(calibrator.a_), float(calibrator.b_)))
            return folds or None
        except (AttributeError, ValueError, TypeError):
            return None

    def risk(self, fdict: Mapping[str, float], *, prepared: bool = False) -> float:
        """The model's failure probability of one :func:`feature_dict` row.

        ``prepared``: the row already went through :meth:`RiskModel.prepare` (as
        :meth:`RiskModel.model_input` returns it); preparing is idempotent, so this only skips
        doing it twice on the pre-check's path. Each fold's weights of the row's columns are
        read in one indexing and summed as Python floats in the row's order: the same
        additions as summing NumPy scalars one by one, without a scalar object per term."""
        if self.folds is None:
            return float(self.model.predict_proba([fdict])[0])
        row = fdict if prepared else self.model.prepare(fdict)
        items = [(column(name), float(value)) for name, value in row.items() if value]
        columns = [col for col, _ in items]
        total = 0.0
        for coef, intercept, a, b in self.folds:
            weighted = 0.0
            for weight, (_col, value) in zip(coef[columns].tolist(), items, strict=True):
                weighted += weight * value
            exponent = a * (intercept + weighted) + b
            total += 0.0 if exponent > 700 else 1.0 / (1.0 + math.exp(exponent))
        return total / len(self.folds)
