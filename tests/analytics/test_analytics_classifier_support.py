"""The risk model's strongest words are backed by failures, and scope words are features.

A fleet like the demo's, built in memory: the researcher's open-ended tasks ("for every
country", "every year") fail often (the scenario's designed risk word is "every"); the
triage agent almost never fails, and its word "log" (as in "Cannot log in") sits in 2 of
its 2 failed tasks by chance. On session 8's model "every" was a stop word, so its
neighbours stood in for it, and "log" got one of the largest weights of the model page
from those 2 tasks. Now a weight that raises the risk needs at least
``MIN_WORD_SUPPORT`` (3) distinct failed tasks, and "every" is a feature.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from retrylens.analytics import classifier as clf
from retrylens.analytics.model_weights import feature_weights
from retrylens.analytics.word_features import MIN_WORD_SUPPORT, unsupported

SUBJECTS = ("log", "invoice", "dark", "crashes", "pricing")


def _fleet() -> tuple[list[dict[str, Any]], list[int]]:
    rng = np.random.default_rng(3)
    inputs: list[dict[str, Any]] = []
    labels: list[int] = []
    for i in range(160):  # the researcher: "every" fails 60 % of the time, the rest 10 %
        scope = ("every", "country") if i % 4 == 0 else ("every", "year") if i % 4 == 1 else ("paragraph",)
        topic = ("batteries", "carbon", "risc-v", "ai-act")[i % 7 % 4]
        inputs.append({"agent": "researcher", "n_chars": 120, **{f"kw:{w}": True for w in (*scope, topic, "sources")}})
        labels.append(int(rng.random() < (0.6 if "every" in scope else 0.1)))
    for i in range(150):  # the triage agent: 2 failed tasks, both about "log"
        subject = SUBJECTS[i % 5]
        inputs.append({"agent": "triage-agent", "n_chars": 80, f"kw:{subject}": True, "kw:ticket": True,
                       "kw:classify": True, "kw:priority": True})
        labels.append(int(subject == "log" and i in (0, 5)))
    return inputs, labels


@pytest.fixture(scope="module")
def fitted() -> tuple[clf.RiskModel, list[dict[str, Any]], list[int]]:
    inputs, labels = _fleet()
    model = clf.fit_in_memory([clf.feature_dict(f) for f in inputs], labels, c=1.0, size_scale=1.0)
    return model, inputs, labels


def test_a_word_of_two_failed_tasks_is_not_among_the_model_pages_weights(fitted) -> None:
    model, inputs, _ = fitted
    names = [name for name, weight in feature_weights(model, inputs) if weight]
    assert "kw:log" not in names
    assert names[0] == "kw:every", names  # the designed risk word leads, not its neighbours


def test_a_failed_tasks_explanation_does_not_name_the_chance_word(fitted) -> None:
    model, inputs, labels = fitted
    failed_triage = next(f for f, y in zip(inputs, labels, strict=True) if y and f["agent"] == "triage-agent")
    contributions = dict(model.contributions(model.model_input(failed_triage)))
    assert not contributions.get("kw:log")
    failed_research = next(f for f, y in zip(inputs, labels, strict=True) if y and "kw:every" in f)
    top_name, top_value = model.contributions(model.model_input(failed_research))[0]
    assert (top_name, top_value > 0) == ("kw:every", True)


def test_scope_words_are_features_in_stored_keywords_and_in_task_text() -> None:
    assert "kw:every" in clf.feature_dict({"kw:every": True, "kw:since": True})
    tokens = clf.text_tokens("Compare all known approaches for every country")
    assert {"tok:every", "tok:every country", "tok:all known"} <= set(tokens)


def test_the_support_rule_counts_distinct_tasks_of_the_weights_outcome() -> None:
    rows = [{"kw:a": 1.0, "kw:b": 1.0}] * 2 + [{"kw:a": 1.0}] * 2 + [{"kw:b": 1.0}] * 3
    labels = [1, 1, 0, 0, 1, 1, 1]
    weights = {"kw:a": 0.5, "kw:b": 0.5, "kw:c": -0.2}
    assert unsupported(weights, rows, labels) == {"kw:a", "kw:c"}  # a: 2 failed tasks; c: no successful one
    grouped = unsupported(weights, rows, labels, groups=["t1", "t1", "t2", "t3", "t4", "t4", "t4"])
    assert grouped == {"kw:a", "kw:b", "kw:c"}  # b's 5 failed rows are 2 tasks
    assert MIN_WORD_SUPPORT == 3


def test_a_warm_started_fit_reaches_the_cold_fits_model_in_fewer_steps() -> None:
    """The selection and calibration fits start from a nearby model (issue 34: the word and pair
    columns made a fit ~40 % dearer in CPU); the optimum is the same, only the path is shorter."""
    import numpy as np
    from planted_words import planted_tasks

    from retrylens.analytics.classifier import CompactLogisticRegression, feature_dict, vectorise

    tasks = planted_tasks(300, seed=3)
    x = vectorise([feature_dict({"agent": t.agent}, text=t.text) for t in tasks])
    y = np.array([int(t.failed) for t in tasks])
    cold = CompactLogisticRegression(C=3.0).fit(x, y)
    warm = CompactLogisticRegression(C=3.0, init=CompactLogisticRegression(C=1.0).fit(x, y)).fit(x, y)
    assert np.abs(warm.predict_proba(x) - cold.predict_proba(x)).max() < 0.01
    assert warm.n_iter_[0] < cold.n_iter_[0]
