"""The risk model trained on what an event carries, against TF-IDF + LR on the whole text.

Why: the product trains on stored events, not on the task text. Until feature set v6 an
event carried the input's 12 most frequent words, so a model trained from events could not
see a word of a long prompt; now it carries every content word and word pair, hashed
(``retrylens.sdk.text.word_hashes``). This bench trains :func:`~retrylens.analytics.classifier.fit_in_memory`
on the event features alone (``text=None``) of the real agent traces and compares it, on the
same folds (5, stratified and grouped by ``task_key``, over ``--seeds`` fold seeds), with
TF-IDF (words and pairs) + logistic regression on the full text, and with the same model
plus a WordLlama sentence embedding of the text (``bench/embedding_features.py``, skipped
with a note when the ``embeddings`` extra is missing).

Usage: ``python bench/event_words.py [--json] [--traces FILE] [--seeds N] [--smoke]``
(``--smoke``: the 40-record fixture, one seed, 3 folds).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import embedding_features as emb  # bench/embedding_features.py
import numpy as np

from retrylens.analytics import classifier as clf
from retrylens.analytics import validation
from retrylens.analytics.training import trace_examples

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "agent_traces" / "dev.jsonl"
SAMPLE = ROOT / "tests" / "fixtures" / "agent_traces_sample.jsonl"


def run(path: Path, seeds: int, n_splits: int) -> dict[str, Any]:
    full = trace_examples(path)
    events = [replace(e, text=None) for e in full]
    labels = [e.label for e in events]
    groups = [e.group for e in events]
    rows = {"events_v6": [e.as_model_input() for e in events]}
    if emb.available():
        rows["events_v6+embedding"] = emb.with_embedding(rows["events_v6"], [str(e.text) for e in full])
    folds: list[dict[str, Any]] = []
    started = time.perf_counter()
    for seed in range(seeds):
        for tr, te in clf.folds(labels, groups, n_splits=n_splits, seed=seed):
            y = [labels[i] for i in te]
            row: dict[str, Any] = {"seed": seed, "n_test": len(te), "positives": sum(y)}
            for name, dicts in rows.items():
                model = clf.fit_in_memory([dicts[i] for i in tr], [labels[i] for i in tr],
                                          groups=[groups[i] for i in tr])
                ev = clf.evaluate(y, model.predict_proba([dicts[i] for i in te]))
                row[name] = {"roc_auc": ev.roc_auc, "brier": ev.brier}
            ev = clf.evaluate(y, validation.tfidf_lr([full[i] for i in tr], [full[i] for i in te]))
            row["tfidf_lr"] = {"roc_auc": ev.roc_auc, "brier": ev.brier}
            folds.append(row)
    names = [*rows, "tfidf_lr"]
    mean = {name: {m: float(np.mean([f[name][m] for f in folds if f[name][m] is not None]))
                   for m in ("roc_auc", "brier")} for name in names}
    wins = {name: {"roc_auc": sum(f[name]["roc_auc"] > f["tfidf_lr"]["roc_auc"] for f in folds),
                   "brier": sum(f[name]["brier"] < f["tfidf_lr"]["brier"] for f in folds)} for name in rows}
    return {"traces": str(path), "records": len(full), "folds": folds, "mean": mean,
            "folds_beating_tfidf_lr": wins, "embedding": emb.available(), "seconds": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=REAL if REAL.exists() else SAMPLE)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    result = run(SAMPLE, 1, 3) if args.smoke else run(args.traces, args.seeds, 5)
    if args.json:
        print(json.dumps(result))
        return
    for name, figures in result["mean"].items():
        print(f"{name:22} AUC {figures['roc_auc']:.3f}  Brier {figures['brier']:.4f}")
    print("folds beating TF-IDF + LR:", result["folds_beating_tfidf_lr"], f"of {len(result['folds'])}")


if __name__ == "__main__":
    main()
