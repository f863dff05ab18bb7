"""The classifier's per-agent size features, its saved artefact and its pre-run-only inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from retrylens.analytics import classifier as clf
from retrylens.analytics.model_store import ModelStore
from retrylens.analytics.traces import read_traces
from retrylens.analytics.training import trace_examples
from retrylens.api.fast_model import LinearRiskScorer

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "agent_traces_sample.jsonl"


@pytest.fixture(scope="module")
def sample_model() -> clf.RiskModel:
    examples = trace_examples(SAMPLE)
    return clf.fit_in_memory([e.as_model_input() for e in examples], [e.label for e in examples],
                             groups=[e.group for e in examples], text_features=True, size_scale=1.0)


def _records_scores(model: clf.RiskModel, path: Path) -> list[float]:
    return [model.risk(r.features(), text=r.task_text) for r in read_traces(path)]


def test_size_norm_is_each_agents_training_mean_and_spread_and_skips_unseen_agents():
    rows = [{"agent=a": 1.0, "n_chars": float(v)} for v in (1, 2, 3, 4, 5)]
    rows += [{"agent=b": 1.0, "n_chars": 7.0} for _ in range(5)]  # never varies: no feature
    norm = clf.SizeNorm.fit(rows, scale=0.5)
    mean, sd = norm.stats["agent=a"]["n_chars"]
    assert mean == pytest.approx(3.0) and sd == pytest.approx(np.std([1, 2, 3, 4, 5]))
    assert "agent=b" not in norm.stats
    scored = norm.apply({"agent=a": 1.0, "n_chars": 5.0})
    assert scored["size_z:n_chars|agent=a"] == pytest.approx(0.5 * 2 / np.std([1, 2, 3, 4, 5]))
    assert norm.apply(scored) == scored  # idempotent: predict_proba may see model_input output again
    assert norm.apply({"agent=a": 1.0, "n_chars": 1e6})["size_z:n_chars|agent=a"] == 0.5 * clf.SIZE_Z_CLIP
    assert not any(k.startswith("size_z:") for k in norm.apply({"agent=c": 1.0, "n_chars": 5.0}))


def test_size_for_its_agent_is_learnt_where_words_and_global_length_cannot_see_it():
    # Two agents, the same words, opposite size effects: long fails for one, short for the other.
    rng = np.random.default_rng(0)
    examples, labels, groups = [], [], []
    for i in range(240):
        agent = "agent=x" if i % 2 else "agent=y"
        size = float(rng.normal(6.0, 0.4))
        harder = size > 6.0 if agent == "agent=x" else size < 6.0
        labels.append(int(rng.random() < (0.85 if harder else 0.15)))
        examples.append({agent: 1.0, "n_chars": size, "tok:refund": 1.0})
        groups.append(f"task-{i // 2}")
    train, test = np.arange(160), np.arange(160, 240)
    y = np.asarray(labels)
    model = clf.fit_in_memory([examples[i] for i in train], y[train], groups=[groups[i] for i in train])
    auc = clf.evaluate(y[test], model.predict_proba([examples[i] for i in test])).roc_auc
    assert auc is not None and auc > 0.75
    assert "size_z:n_chars|agent=x" in model.model_input({"agent": "x", "n_chars": 400})


def test_saved_artefact_round_trips_and_scores_the_same_through_the_fast_path(tmp_path, sample_model):
    store = ModelStore(tmp_path / "models")
    version = store.save(sample_model, {"source": "test"})
    loaded = store.load(version).model
    assert loaded.size_norm == sample_model.size_norm and loaded.size_norm.stats
    assert _records_scores(loaded, SAMPLE) == _records_scores(sample_model, SAMPLE)
    fast = LinearRiskScorer(loaded)
    assert fast.folds is not None  # still the linear shape the pre-check API scores without sklearn
    with_sizes = 0
    for record in read_traces(SAMPLE):
        fdict = loaded.model_input(record.features(), text=record.task_text)
        with_sizes += any(name.startswith("size_z:") for name in fdict)
        assert fast.risk(fdict) == pytest.approx(float(loaded.predict_proba([fdict])[0]), abs=1e-12)
    assert with_sizes >= 20  # the three agents with at least MIN_SIZE_ROWS training rows: 27 records


def test_an_artefact_saved_before_size_features_still_loads_and_scores(tmp_path, sample_model):
    old = clf.RiskModel(sample_model.calibrated, sample_model.coef, sample_model.intercept,
                        text_features=True)
    del old.__dict__["size_norm"]  # as unpickled from a v2 artefact: the attribute does not exist
    fdict = old.model_input({"agent": "x", "n_chars": 10}, text="cancel my flight")
    assert not any(name.startswith("size_z:") for name in fdict)
    assert 0.0 < float(old.predict_proba([fdict])[0]) < 1.0


def test_scores_do_not_move_when_everything_after_the_run_starts_is_rewritten(tmp_path, sample_model):
    changed = tmp_path / "changed.jsonl"
    with changed.open("wb") as out:
        for line in SAMPLE.read_bytes().splitlines():
            record = orjson.loads(line)
            record.update({"steps": [{"role": "tool", "kind": "tool_result", "error": True}], "n_steps": 1,
                           "n_tool_errors": 9, "n_retries_or_repeated_actions": 7, "reward": 0.0,
                           "failure_label": "System Failure", "failure_detail": {"termination_reason": "max_steps"},
                           "retry_stats": {"n_tool_calls": 9}, "meta": {"duration_s": 1, "agent_cost": 9.9},
                           "outcome": "failure" if record["outcome"] == "success" else "success"})
            out.write(orjson.dumps(record) + b"\n")
    assert _records_scores(sample_model, changed) == _records_scores(sample_model, SAMPLE)
