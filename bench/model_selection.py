"""Model selection for the failure classifier: feature-set candidates and baselines, same folds, calibrated.

Why beside ``bench/classifier.py``: that bench compares the shipped model with the
baselines; this one also chooses between feature sets, so that the choice is made on
the same honest folds as the comparison, and it reports calibration (Brier score,
expected calibration error, the pooled reliability table), not ranking alone.

Candidates, all on the same folds of one run:

- ``words_v5`` — the shipped model (:func:`retrylens.analytics.classifier.fit_in_memory`):
  no stop words but the scope words ("every", "all", ...), only words of at least
  ``MIN_WORD_TASKS`` (3) distinct training tasks, and only word weights that at least
  ``MIN_WORD_SUPPORT`` (3) distinct tasks of their outcome back (refitted without the others);
- ``words_v4`` — the previous feature set: scope words dropped as stop words, every weight kept;
- ``words_v4_support`` — ``words_v4`` with the support rule alone;
- ``words_min2`` — the same with words of 2 training tasks allowed;
- ``words_v3`` — the previous feature set: every token, stop words included, no vocabulary;
- ``words_v4_emb`` — ``words_v4`` plus the first 64 dimensions of a sentence embedding of the
  task text (the fleet: of its keywords) from ``bench/embedding_features.py``
  (the ``embeddings`` extra; skipped with a note when it is not installed);
- ``base_rate``, ``input_length`` (logistic regression on log characters) and
  ``tfidf_lr`` (TF-IDF words and pairs of the text + one-hot agent/model, plain
  ``LogisticRegression``) — the baselines of :mod:`retrylens.analytics.validation`.

Data: the real agent traces (``../shared/data/agent_traces/dev.jsonl``, else the shipped
fixture), 5 folds stratified and grouped by ``task_key``; and the simulated fleet
(default scenario, governor driver) read back from an embedded chDB store as training
reads it, 5 expanding-window folds in start order. The model variants choose their C,
size weight and calibration inside each fold's training side only.

``--json`` prints per data set: per-fold ``roc_auc``, ``brier``, ``ece`` of every candidate,
their mean ± sd, the pooled calibration tables, ``selected`` (the model variant with the
lowest mean Brier score; ROC-AUC breaks ties) and ``versus_baselines`` (folds where the
selected variant beat each baseline on ROC-AUC and on Brier). Usage:
``python bench/model_selection.py [--json] [--traces FILE] [--fleet-tasks N] [--seed N] [--folds N]
[--only NAME,NAME]`` (``--only`` runs a subset of the candidates, baselines included, on the same folds).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import embedding_features as emb  # bench/embedding_features.py: the measured, not shipped, embedding
import numpy as np
from classifier import fleet_examples  # bench/classifier.py: the same simulated fleet, read back
from sklearn.linear_model import LogisticRegression

from retrylens.analytics import classifier as clf
from retrylens.analytics.training import Example, trace_examples
from retrylens.analytics.validation import _text, tfidf_lr, time_folds
from retrylens.analytics.word_features import SCOPE_WORDS, STOP_WORDS
from retrylens.sdk.text.features import normalise_input

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "agent_traces" / "dev.jsonl"
SAMPLE = ROOT / "tests" / "fixtures" / "agent_traces_sample.jsonl"
VARIANTS = ("words_v5", "words_v4", "words_v4_support", "words_min2", "words_v3", "words_v4_emb")
BASELINES = ("base_rate", "input_length", "tfidf_lr")
Candidate = Callable[[Sequence[Example], Sequence[Example], bool], np.ndarray]


def _v3_input(example: Example) -> dict[str, float]:
    """The previous feature set's row: every token and keyword, stop words included."""
    row = {k: v for k, v in example.as_model_input().items() if not k.startswith(("tok:", "kw:"))}
    if example.text is None:
        row.update({k: 1.0 for k, v in example.features.items() if k.startswith("kw:") and v})
        return row
    words = clf._TOKEN.findall(normalise_input(example.text))
    counts: dict[str, int] = {}
    for token in (*words, *(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))):
        counts[token] = counts.get(token, 0) + 1
    weights = {f"tok:{t}": 1.0 + math.log(n) for t, n in counts.items()}
    norm = math.sqrt(sum(v * v for v in weights.values())) or 1.0
    row.update({k: v / norm for k, v in weights.items()})
    return row


_EMBEDDED: dict[str, dict[str, float]] = {}
#: ``words_v4_emb``'s embedding dimensions and block weight (``--embedding DIMS:SCALE``).
EMBEDDING = {"dimensions": emb.DIMENSIONS, "scale": emb.SCALE}


def _emb_input(example: Example) -> dict[str, float]:
    """``words_v4``'s row plus the embedding of the task text (the keywords where the text is unknown)."""
    text = _text(example)
    if text not in _EMBEDDED:
        (_EMBEDDED[text],) = emb.embedding_features([text], int(EMBEDDING["dimensions"]), EMBEDDING["scale"])
    return {**_v4_input(example), **_EMBEDDED[text]}


def _v4_input(example: Example) -> dict[str, float]:
    """The ``v4`` row: scope words ("every", "all", ...) dropped as stop words, as they were."""
    row = example.as_model_input()
    if example.text is None:
        return {k: v for k, v in row.items() if not (k.startswith("kw:") and k[3:] in SCOPE_WORDS)}
    old = frozenset(STOP_WORDS | SCOPE_WORDS)
    words = [w for w in clf._TOKEN.findall(normalise_input(example.text)) if w not in old]
    counts: dict[str, int] = {}
    for token in (*words, *(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))):
        counts[token] = counts.get(token, 0) + 1
    weights = {f"tok:{t}": 1.0 + math.log(n) for t, n in counts.items()}
    norm = math.sqrt(sum(v * v for v in weights.values())) or 1.0
    return {**{k: v for k, v in row.items() if not k.startswith("tok:")}, **{k: v / norm for k, v in weights.items()}}


def _variant(min_word_tasks: int, rows: Callable[[Example], dict[str, float]],
             min_support: int = clf.MIN_WORD_SUPPORT) -> Candidate:
    def fit_and_score(train: Sequence[Example], test: Sequence[Example], grouped: bool) -> np.ndarray:
        model = clf.fit_in_memory([rows(e) for e in train], [e.label for e in train],
                                  groups=[e.group for e in train] if grouped else None,
                                  text_features=any(e.text is not None for e in train), min_word_tasks=min_word_tasks,
                                  min_support=min_support)
        return model.predict_proba([rows(e) for e in test])

    return fit_and_score


def _base_rate(train: Sequence[Example], test: Sequence[Example], grouped: bool) -> np.ndarray:
    return np.full(len(test), float(np.mean([e.label for e in train])))


def _input_length(train: Sequence[Example], test: Sequence[Example], grouped: bool) -> np.ndarray:
    x_train = np.array([[clf.input_length(e.features)] for e in train])
    x_test = np.array([[clf.input_length(e.features)] for e in test])
    return LogisticRegression().fit(x_train, [e.label for e in train]).predict_proba(x_test)[:, 1]


CANDIDATES: dict[str, Candidate] = {
    "words_v5": _variant(clf.MIN_WORD_TASKS, Example.as_model_input),
    "words_v4": _variant(clf.MIN_WORD_TASKS, _v4_input, 0),
    "words_v4_support": _variant(clf.MIN_WORD_TASKS, _v4_input),
    "words_min2": _variant(2, _v4_input, 0),
    "words_v3": _variant(1, _v3_input, 0),
    "words_v4_emb": _variant(clf.MIN_WORD_TASKS, _emb_input, 0),
    "base_rate": _base_rate,
    "input_length": _input_length,
    "tfidf_lr": lambda train, test, grouped: tfidf_lr(train, test),
}


def ece(labels: Sequence[int], probabilities: Sequence[float], bins: int = 10) -> float:
    """Expected calibration error: |mean predicted − observed| per decile bin, weighted by rows."""
    table = clf.evaluate(labels, probabilities, bins=bins).calibration
    total = sum(row["n"] for row in table)
    return float(sum(row["n"] * abs(row["mean_predicted"] - row["observed"]) for row in table) / total)


def _summary(values: list[float | None]) -> dict[str, float | None]:
    known = [v for v in values if v is not None]
    if not known:
        return {"mean": None, "sd": None}
    return {"mean": float(np.mean(known)), "sd": float(np.std(known, ddof=1)) if len(known) > 1 else 0.0}


def run(examples: Sequence[Example], splits: Sequence[tuple[np.ndarray, np.ndarray]], *,
        grouped: bool, only: Sequence[str] = tuple(CANDIDATES)) -> dict[str, Any]:
    """Every candidate on every fold; the selection among the model variants; the comparison."""
    names = [n for n in CANDIDATES if n in only]
    rows: list[dict[str, Any]] = []
    pooled: dict[str, tuple[list[int], list[float]]] = {name: ([], []) for name in names}
    for number, (tr, te) in enumerate(splits):
        train, test = [examples[i] for i in tr], [examples[i] for i in te]
        if grouped and {e.group for e in train} & {e.group for e in test}:
            raise ValueError(f"fold {number} has a task on both sides")
        labels = [e.label for e in test]
        row: dict[str, Any] = {"fold": number, "n_train": len(train), "n_test": len(test), "positives": sum(labels)}
        for name in names:
            p = CANDIDATES[name](train, test, grouped)
            ev = clf.evaluate(labels, p)
            row[name] = {"roc_auc": ev.roc_auc, "brier": ev.brier, "ece": ece(labels, p)}
            pooled[name][0].extend(labels)
            pooled[name][1].extend(np.asarray(p, dtype=float).tolist())
        rows.append(row)
        print(f"  fold {number}: " + ", ".join(f"{n} {row[n]['roc_auc']:.3f}" for n in names), file=sys.stderr)
    summary = {name: {m: _summary([r[name][m] for r in rows]) for m in ("roc_auc", "brier", "ece")}
               for name in names}
    selected = min([n for n in VARIANTS if n in names], key=lambda n: (summary[n]["brier"]["mean"], -(summary[n]["roc_auc"]["mean"] or 0.0)))
    versus = {}
    for base in (b for b in BASELINES if b in names):
        auc = sum(1 for r in rows if r[selected]["roc_auc"] is not None and r[base]["roc_auc"] is not None
                  and r[selected]["roc_auc"] > r[base]["roc_auc"])
        versus[base] = {"roc_auc": auc, "brier": sum(1 for r in rows if r[selected]["brier"] < r[base]["brier"]),
                        "of": len(rows)}
    calibration = {name: clf.evaluate(*pooled[name]).calibration for name in names}
    return {"folds": rows, "summary": summary, "selected": selected, "versus_baselines": versus,
            "calibration": calibration}


def traces(path: Path, n_splits: int, only: Sequence[str] = tuple(CANDIDATES)) -> dict[str, Any]:
    examples = trace_examples(path)
    labels, groups = [e.label for e in examples], [e.group for e in examples]
    splits = clf.folds(labels, groups, n_splits=n_splits)
    return {"data": path.name, "n": len(examples), "tasks": len(set(groups)),
            "validation": f"{len(splits)} folds stratified and grouped by task_key", **run(examples, splits, grouped=True, only=only)}


def fleet(tasks: int, seed: int, n_splits: int, only: Sequence[str] = tuple(CANDIDATES)) -> dict[str, Any]:
    examples = fleet_examples(tasks, seed)
    return {"data": f"simulated fleet, default scenario, {tasks} tasks, seed {seed}", "n": len(examples),
            "validation": f"{n_splits} expanding-window folds in start order",
            **run(examples, time_folds(len(examples), n_splits), grouped=False, only=only)}


def _print(name: str, part: dict[str, Any]) -> None:
    print(f"{name}: {part['data']} ({part['n']} rows) — {part['validation']}; selected {part['selected']}")
    for candidate, s in part["summary"].items():
        print(f"  {candidate:13} ROC-AUC {s['roc_auc']['mean']:.3f} ± {s['roc_auc']['sd']:.3f}   "
              f"Brier {s['brier']['mean']:.4f} ± {s['brier']['sd']:.4f}   ECE {s['ece']['mean']:.3f}")
    for base, won in part["versus_baselines"].items():
        print(f"  {part['selected']} beat {base} on ROC-AUC in {won['roc_auc']}/{won['of']} folds, "
              f"on Brier in {won['brier']}/{won['of']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--traces", type=Path, default=REAL if REAL.exists() else SAMPLE)
    parser.add_argument("--fleet-tasks", type=int, default=2000, help="0 skips the fleet")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--only", type=lambda v: [n.strip() for n in v.split(",") if n.strip()],
                        default=list(CANDIDATES), help="candidates to run, comma-separated (default: all)")
    parser.add_argument("--embedding", default=f"{emb.DIMENSIONS}:{emb.SCALE}",
                        help="words_v4_emb's embedding dimensions and weight, DIMS:SCALE")
    parser.add_argument("--smoke", action="store_true", help="tiny size: the test suite's smoke run")
    args = parser.parse_args(argv)
    if args.smoke:
        args.traces, args.fleet_tasks, args.folds, args.only = SAMPLE, 0, 3, ["words_v4"]
    dims, _, scale = args.embedding.partition(":")
    EMBEDDING.update(dimensions=int(dims), scale=float(scale or emb.SCALE))
    unknown = sorted(set(args.only) - set(CANDIDATES))
    if unknown or not any(n in VARIANTS for n in args.only):
        parser.error(f"--only needs at least one of {', '.join(VARIANTS)}; unknown: {', '.join(unknown) or 'none'}")
    if "words_v4_emb" in args.only and not emb.available():
        print("words_v4_emb skipped: the 'embeddings' extra is not installed", file=sys.stderr)
        args.only = [n for n in args.only if n != "words_v4_emb"]
    started = time.perf_counter()
    out: dict[str, Any] = {"traces": traces(args.traces, args.folds, args.only)}
    if args.fleet_tasks:
        out["fleet"] = fleet(args.fleet_tasks, args.seed, args.folds, args.only)
    out["embedding"] = dict(EMBEDDING)
    out["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for name in ("traces", "fleet"):
            if name in out:
                _print(name, out[name])
    return 0


if __name__ == "__main__":
    sys.exit(main())
