"""The model page's feature weights include the per-agent size features the model scores with."""

from __future__ import annotations

from pathlib import Path

from retrylens.analytics import classifier as clf
from retrylens.analytics.model_store import ModelStore, models_dir
from retrylens.analytics.traces import read_traces
from retrylens.analytics.training import trace_examples
from retrylens.config import load_settings
from retrylens.dashboard.local_files import model_info_from_disk

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "agent_traces_sample.jsonl"


def test_the_model_pages_weights_include_the_size_features(tmp_path: Path) -> None:
    examples = trace_examples(SAMPLE)
    model = clf.fit_in_memory([e.as_model_input() for e in examples], [e.label for e in examples],
                              groups=[e.group for e in examples], text_features=True, size_scale=1.0)
    settings = load_settings(data_dir=tmp_path)
    ModelStore(models_dir(settings)).save(model, {"source": "test"})
    recent = [record.features() for record in read_traces(SAMPLE)]
    info = model_info_from_disk(settings, recent)
    assert info is not None
    sizes = {name: weight for name, weight in info.feature_weights if name.startswith("size_z:")}
    assert sizes, info.feature_weights
    for name, weight in sizes.items():  # the weight per unit of the standardised size, as scored
        column = clf.vectorise([{name: 1.0}]).indices
        assert weight == float(model.coef[column].sum())
