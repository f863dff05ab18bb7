"""The words the risk model leans on are content words seen across tasks, not stop words or one-offs."""

from __future__ import annotations

from pathlib import Path

import pytest
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from retrylens.analytics import classifier as clf
from retrylens.analytics.training import trace_examples
from retrylens.analytics.word_features import SCOPE_WORDS

STOP = ENGLISH_STOP_WORDS - SCOPE_WORDS  # scope words ("every", "all") are features since v5

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "agent_traces_sample.jsonl"
REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "agent_traces" / "dev.jsonl"
TOP = 40


def _word_features(model: clf.RiskModel, rows: list[dict[str, float]]) -> list[str]:
    """The TOP strongest features the model scores the rows with (as the model page lists them)."""
    names: dict[str, float] = {}
    for row in rows:
        names.update(dict.fromkeys(model.prepare(row), 1.0))
    return [name for name, _ in model.contributions(names, top=TOP)]


def _terms(examples: list) -> dict[str, str]:
    """The word or word pair each hashed word feature of the examples' texts stands for."""
    names: dict[str, str] = {}
    for example in examples:
        names.update(clf.term_names(example.text))
    return names


def _tasks_with(word_feature: str, examples: list, rows: list[dict[str, float]]) -> int:
    return len({e.group for e, row in zip(examples, rows, strict=True) if word_feature in row})


@pytest.mark.skipif(not REAL.exists(), reason="the real agent traces are not on this machine")
def test_top_features_on_the_dev_traces_have_no_stop_words_and_no_single_document_words():
    examples = trace_examples(REAL)
    rows = [e.as_model_input() for e in examples]
    model = clf.fit_in_memory(rows, [e.label for e in examples], groups=[e.group for e in examples],
                              text_features=True)
    top = _word_features(model, rows)
    words = [name for name in top if name.startswith(("h:", "kw:"))]
    assert words, top  # the text does carry weight among the strongest features
    terms = _terms(examples)
    stop = [terms[name] for name in words if set(terms[name].split()) & STOP]
    assert not stop, stop
    rare = [name for name in words if _tasks_with(name, examples, rows) < 2]
    assert not rare, rare


def test_a_word_of_one_training_task_gets_no_weight_and_stop_words_are_never_features():
    examples = trace_examples(SAMPLE)
    rows = [e.as_model_input() for e in examples]
    terms = _terms(examples)
    assert not any(set(terms[k].split()) & STOP for r in rows for k in r if k.startswith("h:"))
    model = clf.fit_in_memory(rows, [e.label for e in examples], groups=[e.group for e in examples],
                              text_features=True, c=1.0, size_scale=1.0)
    once = {k for k in {k for r in rows for k in r if k.startswith("h:")}
            if _tasks_with(k, examples, rows) < clf.MIN_WORD_TASKS}
    assert once  # the fixture has words of one task only
    for row in rows:
        assert not set(model.prepare(row)) & once


def test_stored_keywords_that_are_stop_words_are_dropped():
    features = {"kw:every": True, "kw:since": True, "kw:chargeback": True, "agent": "support-agent"}
    assert set(clf.feature_dict(features)) == {"kw:every", "kw:chargeback", "agent=support-agent"}
