"""The failure classifier: beats both baselines, reads the store in chunks, versions its models."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from retrylens.analytics.classifier import RiskContext, feature_dict
from retrylens.analytics.model_store import (
    ModelNotFoundError,
    ModelStore,
    load_current_model,
    models_dir,
)
from retrylens.analytics.synthetic import synthetic_events
from retrylens.analytics.traces import TraceFormatError, read_traces
from retrylens.analytics.training import (
    evaluate_traces,
    stream_examples,
    train_from_store,
    train_from_traces,
)
from retrylens.sdk.text.features import extract_input_features
from retrylens.store.event_table import event_row

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SAMPLE = FIXTURES / "agent_traces_sample.jsonl"
REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "agent_traces" / "dev.jsonl"


@pytest.fixture(scope="module")
def synthetic_store(module_stores):
    """2,000 synthetic tasks loaded once for the module: its three tests only read them
    (``train_from_store`` without a model store saves nothing), so one load, not three."""
    store = module_stores()
    # A fixed time of day: the hour is a feature, so results must not depend on when tests run.
    noon = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=1)
    events = synthetic_events(2000, seed=3, now=noon)
    store.insert_rows([event_row(e, topic="syn", partition=0, offset=i) for i, e in enumerate(events)])
    return store


@pytest.fixture(scope="module")
def sample_model():
    """One fit of the 40-trace sample, shared by the tests that only read the model (each fit
    runs the grouped cross-validation and its settings search: seconds of CPU)."""
    return train_from_traces(SAMPLE).model


def _beats_baselines(meta):
    model, base = meta["metrics"], meta["baselines"]
    for name in ("base_rate", "input_length"):
        assert model["roc_auc"] > base[name]["roc_auc"], name
        assert model["pr_auc"] > base[name]["pr_auc"], name
        assert model["brier"] < base[name]["brier"], name


@pytest.mark.clickhouse
def test_beats_both_baselines_on_a_time_ordered_split_of_synthetic_tasks(synthetic_store):
    result = train_from_store(synthetic_store)
    _beats_baselines(result.meta)
    assert result.meta["n_test"] == 400 and result.meta["training_window"]["end"] is not None


@pytest.mark.clickhouse
def test_out_of_core_path_trains_from_chunks_and_still_beats_baselines(synthetic_store):
    blocks = list(stream_examples(synthetic_store, block_rows=300))
    assert len(blocks) > 3 and all(len(b) <= 300 for b in blocks)
    starts = [e.start for b in blocks for e in b]
    assert starts == sorted(starts)
    result = train_from_store(synthetic_store, in_memory_limit=100, block_rows=300)
    assert result.meta["estimator"].startswith("SGDClassifier")
    _beats_baselines(result.meta)


@pytest.mark.clickhouse
def test_fingerprint_history_uses_only_earlier_tasks(synthetic_store):
    first = next(iter(stream_examples(synthetic_store)))[0]
    assert first.context.fingerprint_tasks == 0


def test_versions_are_saved_and_the_current_model_reloads(settings):
    target = ModelStore(models_dir(settings))
    with pytest.raises(ModelNotFoundError):
        load_current_model(settings)
    first = train_from_traces(SAMPLE, model_store=target)
    assert load_current_model(settings, check_interval_s=0).version == first.version == "v0001"
    # the same file again: judged out of fold against a model that trained on every one of
    # its tasks, the retrain is no better, so it is kept as a candidate unless forced
    kept = train_from_traces(SAMPLE, model_store=target)
    assert kept.meta["promotion"]["promoted"] is False and target.current_version() == "v0001"
    second = train_from_traces(SAMPLE, model_store=target, force=True)
    loaded = load_current_model(settings, check_interval_s=0)
    assert loaded.version == second.version == "v0003"
    assert loaded.meta["source"] == "traces:agent_traces_sample.jsonl" and loaded.meta["features"]
    assert target.versions() == ["v0001", "v0002", "v0003"]


def test_risk_uses_the_shared_feature_function_and_explains_itself(sample_model):
    model = sample_model
    features = extract_input_features("Cancel my flight and refund it", agent="airline default gpt-4.1")
    risk = model.risk(features, RiskContext(phase="planning"))
    assert 0.0 < risk < 1.0
    top = model.contributions(feature_dict(features), top=3)
    assert len(top) == 3 and all(name in feature_dict(features) for name, _ in top)


def test_sample_traces_are_scored_with_sane_metrics(sample_model):
    model = sample_model
    result = evaluate_traces(model, SAMPLE)
    assert result.n == 40 and result.positives == 24
    assert 0.5 < result.roc_auc <= 1.0 and 0.0 <= result.brier < 0.25


@pytest.mark.slow
@pytest.mark.skipif(not REAL.exists(), reason="the real agent traces are not on this machine")
def test_beats_both_baselines_on_the_real_traces():
    result = train_from_traces(REAL)
    _beats_baselines(result.meta)


def test_bad_trace_files_are_rejected_with_the_line(tmp_path):
    with pytest.raises(TraceFormatError, match="does not exist"):
        read_traces(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(SAMPLE.read_text().splitlines()[0] + "\n{not json\n")
    with pytest.raises(TraceFormatError, match=r"bad.jsonl:2: not valid JSON"):
        read_traces(bad)
    bad.write_text('{"task_text": "x", "outcome": "maybe"}\n')
    with pytest.raises(TraceFormatError, match="outcome must be"):
        read_traces(bad)


@pytest.mark.slow
@pytest.mark.clickhouse
def test_beats_both_baselines_on_the_simulated_fleet(store):
    from retrylens import simulation
    events: list = []
    noon = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=3)
    simulation.run_fleet(simulation.load_scenario(), tasks=2000, seed=1, driver="governor", emit=events.append,
                         start=noon)
    store.insert_rows([event_row(e, topic="fleet", partition=0, offset=i) for i, e in enumerate(events)])
    _beats_baselines(train_from_store(store).meta)
