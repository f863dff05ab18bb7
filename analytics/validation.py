"""Cross-validation of the failure classifier against its baselines, fold by fold.

Why a module of its own: the figure a model is chosen and advertised by must come from
the same folds for every candidate, with no task on both sides of a fold (trace files,
:func:`.classifier.folds` grouped by task key) or, for a store's history, always training
on earlier tasks and testing on later ones (:func:`time_folds`). Candidates:

- ``model`` — :func:`.classifier.fit_in_memory`, itself choosing C, the weight of its
  per-agent size features and its calibration on folds grouped inside the training side
  only (the size statistics too are fitted on the training side);
- ``base_rate`` — the training side's failure rate;
- ``input_length`` — logistic regression on log(characters);
- ``tfidf_lr`` — TF-IDF (words and word pairs, sublinear tf) of the task text plus one-hot
  agent and model, plain ``LogisticRegression()``. On examples without their text (the
  store keeps only the 12 keywords of ``input_features``) the keywords are the text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import TimeSeriesSplit
from sklearn.preprocessing import OneHotEncoder

from . import classifier as clf

Split = tuple[np.ndarray, np.ndarray]
CANDIDATES = ("model", "base_rate", "input_length", "tfidf_lr")


def time_folds(n: int, n_splits: int = 5) -> list[Split]:
    """Expanding-window folds over time-ordered rows: train on everything before the test block."""
    return list(TimeSeriesSplit(n_splits).split(np.zeros(n)))


def _text(example: Any) -> str:
    if example.text is not None:
        return str(example.text)
    return " ".join(k[3:] for k, v in example.features.items() if k.startswith("kw:") and v)


def _categories(example: Any) -> list[str]:
    return [str(example.features.get("agent", "")), str(example.features.get("model", ""))]


def tfidf_lr(train: Sequence[Any], test: Sequence[Any]) -> np.ndarray:
    """The plain text baseline: TF-IDF + one-hot agent/model → ``LogisticRegression()``."""
    words = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2))
    onehot = OneHotEncoder(handle_unknown="ignore")
    x_train = sparse.hstack([words.fit_transform([_text(e) for e in train]),
                             onehot.fit_transform([_categories(e) for e in train])]).tocsr()
    x_test = sparse.hstack([words.transform([_text(e) for e in test]),
                            onehot.transform([_categories(e) for e in test])]).tocsr()
    model = LogisticRegression(max_iter=2000).fit(x_train, [e.label for e in train])
    return model.predict_proba(x_test)[:, 1]


def _model(train: Sequence[Any], test: Sequence[Any], grouped: bool) -> np.ndarray:
    model = clf.fit_in_memory([e.as_model_input() for e in train], [e.label for e in train],
                              groups=[e.group for e in train] if grouped else None,
                              text_features=any(e.text is not None for e in train))
    return model.predict_proba([e.as_model_input() for e in test])


def _baselines(train: Sequence[Any], test: Sequence[Any]) -> dict[str, np.ndarray]:
    y = np.asarray([e.label for e in train], dtype=int)
    x_train = np.array([[clf.input_length(e.features)] for e in train])
    x_test = np.array([[clf.input_length(e.features)] for e in test])
    return {
        "base_rate": np.full(len(test), float(y.mean())),
        "input_length": LogisticRegression().fit(x_train, y).predict_proba(x_test)[:, 1],
        "tfidf_lr": tfidf_lr(train, test),
    }


def _summary(values: list[float | None]) -> dict[str, float | None]:
    known = [v for v in values if v is not None]
    if not known:
        return {"mean": None, "sd": None}
    return {"mean": float(np.mean(known)), "sd": float(np.std(known, ddof=1)) if len(known) > 1 else 0.0}


def cross_validate(examples: Sequence[Any], splits: Sequence[Split], *, grouped: bool = True,
                   progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Every candidate on the same folds: per-fold, mean ± sd, and pooled out-of-fold figures.

    ``examples`` need ``features``, ``label``, ``text``, ``group`` and ``as_model_input()``
    (:class:`.training.Example`). ``grouped``: the model's own inner folds group by task.
    ``out_of_fold`` maps each tested example's index to the model's probability from the fold
    that did not train on it: what a promotion check may judge the model by.
    """
    rows: list[dict[str, Any]] = []
    pooled: dict[str, list[tuple[int, float]]] = {name: [] for name in CANDIDATES}
    out_of_fold: dict[int, float] = {}
    for number, (tr, te) in enumerate(splits):
        train, test = [examples[i] for i in tr], [examples[i] for i in te]
        labels = [e.label for e in test]
        probabilities = {"model": _model(train, test, grouped), **_baselines(train, test)}
        out_of_fold.update(zip((int(i) for i in te), probabilities["model"].tolist(), strict=True))
        row: dict[str, Any] = {"fold": number, "n_train": len(train), "n_test": len(test), "positives": sum(labels)}
        for name in CANDIDATES:
            ev = clf.evaluate(labels, probabilities[name])
            row[name] = {"roc_auc": ev.roc_auc, "brier": ev.brier}
            pooled[name].extend(zip(labels, probabilities[name].tolist(), strict=True))
        if grouped and {e.group for e in train} & {e.group for e in test}:
            raise ValueError(f"fold {number} has a task on both sides")
        rows.append(row)
        if progress:
            progress(number)
    summary = {name: {metric: _summary([r[name][metric] for r in rows]) for metric in ("roc_auc", "brier")}
               for name in CANDIDATES}
    pooled_eval = {}
    for name, pairs in pooled.items():
        ev = clf.evaluate([y for y, _ in pairs], [p for _, p in pairs])
        pooled_eval[name] = {k: v for k, v in ev.as_dict().items() if k != "calibration"}
    return {"folds": rows, "summary": summary, "pooled": pooled_eval, "out_of_fold": out_of_fold}
