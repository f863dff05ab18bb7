"""Training and evaluating the risk model: from the event store or from a trace file.

Store path: one row per finished task, streamed from ClickHouse in blocks, oldest first
(the server aggregates; the client never holds the history). A task's label is "failed or
handed off". The fingerprint's earlier record is computed per task from tasks that
*started before it* (a window function), so training sees no future. The split is by
time: the last ``test_share`` of tasks is the test set.

Trace path: :mod:`.traces` records (there is no time in that format). The report is
cross-validation grouped by ``task_key`` (:mod:`.validation`: no task on both sides of a
fold), the model against the base rate, input length and TF-IDF + logistic regression;
the saved model is then fitted on every record, with the task text's tokens as features.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from retrylens.errors import ModelNotFoundError
from retrylens.store import EventStore

from . import classifier as clf
from . import validation
from .advice import build_advice_book
from .advice_segments import Segments, risk_segments
from .blas_threads import one_blas_thread
from .classifier import RiskContext, RiskModel, feature_dict
from .filters import Slice
from .model_store import LoadedModel, ModelStore
from .promotion import judge, judge_scores
from .traces import TraceRecord, read_traces


@dataclass(frozen=True)
class Example:
    start: datetime | None
    features: dict[str, Any]
    context: RiskContext
    label: int
    text: str | None = None  # the task input, where known (trace files)
    group: str = ""  # what must not straddle folds: the task key
    task_id: str = ""  # the stored task (store path): which tasks the advice book's segments hold
    agent_key: str = ""  # ``project/agent`` (store path)

    def as_model_input(self) -> dict[str, float]:
        return feature_dict(self.features, self.context, text=self.text)


_TASKS = (
    "SELECT start_ts, features, phase, label, project, task_id, agent,"
    " count() OVER w AS fp_tasks, sum(label) OVER w AS fp_failed"
    " FROM ("
    "  SELECT project, task_id, min(ts) AS start_ts, any(agent_name) AS agent,"
    "   argMinIf(input_features, ts, input_features != '') AS features,"
    "   argMinIf(phase, ts, phase != '') AS phase,"
    "   anyIf(input_fingerprint, input_fingerprint != '') AS fp,"
    "   argMaxIf(toString(outcome), ts, outcome != '') AS final,"  # incl. compact first-try successes
    "   toUInt8(final IN ('failed', 'handed_off')) AS label"
    "  FROM [[db]].events FINAL WHERE {where} GROUP BY project, task_id"
    "  HAVING final != '' AND features != '')"
    " WINDOW w AS (PARTITION BY project, if(fp = '', task_id, fp) ORDER BY start_ts, task_id"
    "   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
    " ORDER BY start_ts, task_id"
)


def stream_examples(store: EventStore, where: Slice = Slice(), *, block_rows: int = 20_000) -> Iterator[list[Example]]:
    """Finished tasks in time order, in blocks of about ``block_rows``."""
    clause, params = where.where()
    sql = store.sql(_TASKS.replace("{where}", clause))
    with store.client.query_row_block_stream(sql, parameters=params, settings={"max_block_size": block_rows}) as rows:
        for block in rows:
            yield [
                Example(
                    start=start,
                    features=orjson.loads(features),
                    context=RiskContext(
                        phase=phase, fingerprint_tasks=int(fp_tasks or 0),
                        fingerprint_failed_tasks=int(fp_failed or 0),
                    ),
                    label=int(label),
                    task_id=str(task_id),
                    agent_key=f"{project}/{agent}",
                )
                for start, features, phase, label, project, task_id, agent, fp_tasks, fp_failed in block
            ]


@dataclass(frozen=True)
class TrainingResult:
    model: RiskModel
    meta: dict[str, Any]
    version: str | None = None


def _report(model: RiskModel, train: list[Example], test: list[Example]) -> dict[str, Any]:
    labels = [e.label for e in test]
    model_eval = clf.evaluate(labels, model.predict_proba([e.as_model_input() for e in test]))
    base = clf.baselines([e.features for e in train], [e.label for e in train], [e.features for e in test], labels)
    return {
        "metrics": model_eval.as_dict(),
        "baselines": {name: ev.as_dict() for name, ev in base.items()},
        "n_train": len(train),
        "n_test": len(test),
        "train_positive_rate": float(np.mean([e.label for e in train])) if train else None,
    }


def _meta(source: str, train: list[Example], report: dict[str, Any], model: RiskModel) -> dict[str, Any]:
    starts = [e.start for e in train if e.start is not None]
    return {
        "source": source,
        "feature_set": clf.FEATURE_SET_VERSION,
        "features": list(clf.FEATURE_FAMILIES),
        "estimator": model.meta.get("estimator"),
        "training_window": {
            "start": min(starts).isoformat() if starts else None,
            "end": max(starts).isoformat() if starts else None,
        },
        **report,
    }


@one_blas_thread
def train_from_store(
    store: EventStore, where: Slice = Slice(), *, test_share: float = 0.2, in_memory_limit: int = 200_000,
    block_rows: int = 20_000, model_store: ModelStore | None = None, force: bool = False,
) -> TrainingResult:
    """Time-ordered split; in-memory fit up to ``in_memory_limit`` tasks, else out-of-core.

    ``where`` limits training to a time window (``start``/``end``) and a project. The store is
    read twice: once to count, once to stream. Only the test set (the last ``test_share`` of
    tasks) is kept in memory on the out-of-core path. With ``model_store`` the model is saved
    and made current only if it is no worse than the current one on that test set
    (:mod:`.promotion`; ``force`` overrides), else saved as a candidate; ``meta["promotion"]``
    says which, with both figures.
    """
    total = sum(len(block) for block in stream_examples(store, where, block_rows=block_rows))
    if total < 20:
        raise ValueError(f"only {total} finished tasks with input features in the store; need at least 20")
    n_train = int(total * (1 - test_share))
    train: list[Example] = []
    test: list[Example] = []
    if total <= in_memory_limit:
        for block in stream_examples(store, where, block_rows=block_rows):
            for example in block:
                (train if len(train) < n_train else test).append(example)
        inputs = [e.as_model_input() for e in train]
        model = clf.fit_in_memory(inputs, [e.label for e in train])
        sample_train = train
        segments = _segments(model, train + test, inputs + [e.as_model_input() for e in test])
    else:
        sample_train = []

        def train_chunks() -> Iterator[tuple[list[dict[str, float]], list[int]]]:
            seen = 0
            for block in stream_examples(store, where, block_rows=block_rows):
                head = block[: max(0, n_train - seen)]
                test.extend(block[len(head):])
                seen += len(block)
                if head:
                    sample_train.extend(head[:: max(1, len(head) // 500)])
                    yield [e.as_model_input() for e in head], [e.label for e in head]

        model = clf.fit_incremental(train_chunks())
        segments = None  # the history is not held in memory: the book's records stay pooled per agent
    report = _report(model, sample_train, test)
    meta = _meta("store", sample_train, report, model)
    meta["n_train"] = n_train
    meta["advice_book"] = build_advice_book(store, where, segments)
    version = None
    if model_store is not None:
        promotion = judge(model, _in_force(model_store), [e.as_model_input() for e in test], [e.label for e in test],
                          force=force)
        meta["promotion"] = promotion.as_dict()
        version = model_store.save(model, meta, make_current=promotion.promoted)
    return TrainingResult(model, meta, version)


def _segments(model: RiskModel, tasks: list[Example], inputs: list[dict[str, float]]) -> Segments:
    """The advice book's risk segments: each stored task the book reads, scored by the model just fitted."""
    risks = model.predict_proba(inputs)
    return risk_segments([e.agent_key for e in tasks], [e.task_id for e in tasks], risks.tolist(),
                         [e.label for e in tasks])


def _in_force(model_store: ModelStore) -> LoadedModel | None:
    version = model_store.current_version()
    try:
        return model_store.load(version) if version else None
    except (ModelNotFoundError, OSError, ValueError, AttributeError, ImportError):
        return None  # unreadable: nothing to compare with


def trace_examples(path: str | Path) -> list[Example]:
    """Every record of a trace file as an example, grouped by task key."""
    return [Example(None, dict(r.features()), RiskContext(), int(r.failed), text=r.task_text, group=r.task_key)
            for r in read_traces(path)]


@one_blas_thread
def train_from_traces(path: str | Path, *, model_store: ModelStore | None = None, n_splits: int = 5,
                      force: bool = False) -> TrainingResult:
    """Grouped-CV report (model vs baselines), then fit on every record and save.

    ``metrics``/``baselines`` in the meta are the out-of-fold figures pooled over folds;
    ``cv`` holds them per fold with mean and standard deviation. With ``model_store`` the
    model becomes current only if its out-of-fold Brier score is no worse than the model in
    force on the same tasks (:func:`.promotion.judge_scores`; ``force`` overrides), else it
    is saved as a candidate: a worse retrain never replaces a better model unchecked. (The
    model in force may have trained on these tasks; the check then leans its way.)
    """
    examples = trace_examples(path)
    labels = [e.label for e in examples]
    groups = [e.group for e in examples]
    splits = clf.folds(labels, groups, n_splits=n_splits)
    report = validation.cross_validate(examples, splits) if splits else None
    model = clf.fit_in_memory([e.as_model_input() for e in examples], labels, groups=groups, text_features=True)
    summary: dict[str, Any] = {"n_train": len(examples), "n_test": 0}
    if report is not None:
        summary = {"metrics": report["pooled"]["model"],
                   "baselines": {k: v for k, v in report["pooled"].items() if k != "model"},
                   "n_train": len(examples), "n_test": len(examples),
                   "validation": f"out-of-fold, {len(splits)} folds grouped by task_key",
                   "cv": report["summary"], "cv_folds": report["folds"]}
    meta = _meta(f"traces:{Path(path).name}", examples, summary, model)
    version = None
    if model_store is not None:
        scored = sorted((report or {}).get("out_of_fold", {}).items())
        promotion = judge_scores([p for _, p in scored], _in_force(model_store),
                                 [examples[i].as_model_input() for i, _ in scored],
                                 [examples[i].label for i, _ in scored], force=force,
                                 held_out="tasks scored out of fold")
        meta["promotion"] = promotion.as_dict()
        version = model_store.save(model, meta, make_current=promotion.promoted)
    return TrainingResult(model, meta, version)


def evaluate_traces(model: RiskModel, traces: str | Path | list[TraceRecord]) -> clf.Evaluation:
    """Score every record of a trace file (or already read records) with ``model``."""
    records = traces if isinstance(traces, list) else read_traces(traces)
    probabilities = model.predict_proba([model.model_input(r.features(), text=r.task_text) for r in records])
    return clf.evaluate([int(r.failed) for r in records], probabilities)
