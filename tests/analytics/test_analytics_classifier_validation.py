"""Honest validation of the failure classifier: grouped folds, pre-run features only, baselines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from retrylens.analytics import classifier as clf
from retrylens.analytics.training import trace_examples, train_from_traces
from retrylens.analytics.validation import cross_validate, time_folds

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "agent_traces_sample.jsonl"
REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "agent_traces" / "dev.jsonl"


@pytest.mark.parametrize("n_splits", [2, 3, 5])
def test_grouped_folds_never_put_a_task_on_both_sides(n_splits):
    rng = np.random.default_rng(0)
    groups = [f"task-{rng.integers(0, 30)}" for _ in range(200)]
    labels = [int(rng.random() < 0.4) for _ in groups]
    splits = clf.folds(labels, groups, n_splits=n_splits)
    assert len(splits) == n_splits
    covered = np.concatenate([te for _, te in splits])
    assert sorted(covered.tolist()) == list(range(200))  # a partition: every row tested once
    for tr, te in splits:
        assert not {groups[i] for i in tr} & {groups[i] for i in te}


def test_grouped_folds_on_the_fixture_keep_attempts_of_one_task_together():
    examples = trace_examples(SAMPLE)
    groups = [e.group for e in examples]
    assert len(set(groups)) < len(groups)  # the fixture does repeat a task
    for tr, te in clf.folds([e.label for e in examples], groups):
        assert not {groups[i] for i in tr} & {groups[i] for i in te}


def test_time_folds_train_only_on_earlier_rows():
    for tr, te in time_folds(100, 5):
        assert tr.max() < te.min()


def test_model_inputs_are_pre_run_features_only(tmp_path):
    examples = trace_examples(SAMPLE)
    for example in examples:
        names = example.as_model_input().keys()
        assert all(name.startswith(clf.PRE_RUN_PREFIXES) for name in names), names
    # rewrite everything that happens during or after a run: the model's inputs do not move
    changed = tmp_path / "changed.jsonl"
    with changed.open("wb") as out:
        for line in SAMPLE.read_bytes().splitlines():
            record = orjson.loads(line)
            record.update({"steps": [{"role": "tool", "kind": "tool_result", "error": True}], "n_steps": 1,
                           "n_tool_errors": 9, "reward": 0.0, "failure_label": "System Failure",
                           "retry_stats": {"n_tool_calls": 9}, "meta": {"duration": 1}})
            out.write(orjson.dumps(record) + b"\n")
    assert [e.as_model_input() for e in trace_examples(changed)] == [e.as_model_input() for e in examples]


def test_shipped_model_beats_the_base_rate_on_the_fixture_under_grouped_cv():
    examples = trace_examples(SAMPLE)
    splits = clf.folds([e.label for e in examples], [e.group for e in examples], n_splits=4)
    pooled = cross_validate(examples, splits)["pooled"]
    assert pooled["model"]["roc_auc"] > pooled["base_rate"]["roc_auc"]
    assert pooled["model"]["brier"] < pooled["base_rate"]["brier"]


def test_training_reports_per_fold_figures_for_the_model_and_every_baseline():
    meta = train_from_traces(SAMPLE, n_splits=3).meta
    assert meta["validation"].endswith("grouped by task_key") and len(meta["cv_folds"]) == 3
    for row in meta["cv_folds"]:
        assert set(row) >= {"fold", "n_train", "n_test", "model", "base_rate", "input_length", "tfidf_lr"}
    assert set(meta["baselines"]) == {"base_rate", "input_length", "tfidf_lr"}
    assert meta["cv"]["model"]["roc_auc"]["sd"] is not None


def test_fast_path_still_equals_the_models_prediction_for_a_text_model():
    from retrylens.api.fast_model import LinearRiskScorer

    model = train_from_traces(SAMPLE).model
    fast = LinearRiskScorer(model)
    assert fast.folds is not None and model.text_features
    for example in trace_examples(SAMPLE)[:5]:
        fdict = model.model_input(example.features, text=example.text)
        assert fast.risk(fdict) == pytest.approx(float(model.predict_proba([fdict])[0]), abs=1e-12)
