"""A retrained model becomes current only if it is no worse than the one in force on recent held-out tasks."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from planted_words import planted_tasks

from retrylens.analytics import classifier as clf
from retrylens.analytics.filters import Slice
from retrylens.analytics.model_store import LoadedModel, ModelStore
from retrylens.analytics.promotion import judge
from retrylens.analytics.training import train_from_store
from retrylens.schemas import RetryEvent
from retrylens.sdk.text.features import extract_input_features
from retrylens.store.event_table import event_row

TASKS = planted_tasks(200, seed=5)
ROWS = [clf.feature_dict(extract_input_features(t.text, agent=t.agent)) for t in TASKS]
LABELS = [int(t.failed) for t in TASKS]
TRAIN, HELD = slice(0, 300), slice(300, 400)


def _loaded(model: clf.RiskModel, feature_set: str = clf.FEATURE_SET_VERSION) -> LoadedModel:
    return LoadedModel("v0001", model, {"feature_set": feature_set})


def _good() -> clf.RiskModel:
    return clf.fit_in_memory(ROWS[TRAIN], LABELS[TRAIN], c=3.0, size_scale=0.0)


def _noise() -> clf.RiskModel:
    shuffled = LABELS[TRAIN]
    random.Random(1).shuffle(shuffled)
    return clf.fit_in_memory(ROWS[TRAIN], shuffled, c=3.0, size_scale=0.0)


def test_a_worse_candidate_is_kept_as_a_candidate_with_both_figures() -> None:
    verdict = judge(_noise(), _loaded(_good()), ROWS[HELD], LABELS[HELD])
    assert not verdict.promoted
    assert verdict.current is not None and verdict.candidate["brier"] > verdict.current["brier"]
    assert verdict.candidate["roc_auc"] < verdict.current["roc_auc"]
    assert "kept as a candidate" in verdict.reason and "--force" in verdict.reason


def test_force_makes_a_worse_candidate_current_and_says_so() -> None:
    verdict = judge(_noise(), _loaded(_good()), ROWS[HELD], LABELS[HELD], force=True)
    assert verdict.promoted and verdict.reason.startswith("forced")


def test_a_better_candidate_is_promoted() -> None:
    verdict = judge(_good(), _loaded(_noise()), ROWS[HELD], LABELS[HELD])
    assert verdict.promoted and verdict.reason.startswith("no worse than v0001")


def test_a_model_in_force_of_another_feature_set_is_replaced() -> None:
    verdict = judge(_noise(), _loaded(_good(), feature_set="v5"), ROWS[HELD], LABELS[HELD])
    assert verdict.promoted and "feature set v5" in verdict.reason


def _store_tasks(store, start: datetime) -> None:
    events = []
    for number, (task, row) in enumerate(zip(TASKS, ROWS, strict=True)):
        del row
        common = {"project": "p", "agent": {"name": task.agent}, "task_id": f"t{number}"}
        at = start + timedelta(minutes=number)
        events += [RetryEvent(correlation_id=f"t{number}-0", kind="task_started", ts=at,
                              input_features=extract_input_features(task.text, agent=task.agent), **common),
                   RetryEvent(correlation_id=f"t{number}-1", attempt=1, kind="task_finished", ts=at + timedelta(seconds=5),
                              outcome="failed" if task.failed else "succeeded", **common)]
    store.insert_rows([event_row(e, topic="test", partition=0, offset=i) for i, e in enumerate(events)])


@pytest.mark.clickhouse
def test_train_from_store_keeps_a_worse_model_as_a_candidate_and_takes_a_time_window(store, tmp_path) -> None:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    _store_tasks(store, start)
    models = ModelStore(tmp_path / "models")
    first = train_from_store(store, model_store=models)
    assert first.meta["promotion"]["promoted"] and models.current_version() == first.version
    # a window of the first 60 tasks only: a model of 48 tasks, judged on that window's last 12
    early = train_from_store(store, Slice(end=start + timedelta(minutes=60)), model_store=models)
    assert early.meta["n_train"] == 48 and early.meta["training_window"]["end"] < (start + timedelta(hours=1)).isoformat()
    verdict = early.meta["promotion"]
    assert verdict["current"] is not None and verdict["candidate"]["brier"] is not None
    assert (models.current_version() == early.version) == verdict["promoted"]
    forced = train_from_store(store, Slice(end=start + timedelta(minutes=60)), model_store=models, force=True)
    assert forced.meta["promotion"]["promoted"] and models.current_version() == forced.version
