"""The risk model sees the whole input and explains it with real effects, on planted truth.

A word planted in a long prompt (``wire`` among 15–19 content words) must reach the stored
event and the model as a word of a short prompt (``offshore``) does, and a task's first
reason must be that word when the task has it, and the word absent from its reasons
otherwise; sizes, which have no planted effect, are no reason.
"""

from __future__ import annotations

from functools import lru_cache

from planted_words import PLANTED, planted_tasks
from sklearn.metrics import roc_auc_score

from retrylens.analytics import classifier as clf
from retrylens.sdk.text.features import extract_input_features, input_terms
from retrylens.sdk.text.word_hashes import MAX_TERMS, decode, term_hash

TRAIN, TEST = 240, 80


@lru_cache(maxsize=1)
def _fitted() -> tuple[clf.RiskModel, list, list]:
    tasks = planted_tasks(TRAIN + TEST, seed=3)
    events = [extract_input_features(t.text, agent=t.agent) for t in tasks]
    rows = [clf.feature_dict(f) for f in events]  # the stored event alone: no text
    n = 2 * TRAIN
    model = clf.fit_in_memory(rows[:n], [int(t.failed) for t in tasks[:n]], c=3.0)
    return model, tasks[n:], events[n:]


def test_every_content_word_of_a_long_prompt_reaches_the_event() -> None:
    words = ("wire " + " ".join(f"topic{chr(97 + i)}word" for i in range(20)) + " voucher wallet transfer").split()
    features = extract_input_features(" ".join(words), agent="a")
    assert {term_hash(w) for w in words} <= set(decode(features))
    assert term_hash("wire topicaword") in set(decode(features))  # the adjacent pair too


def test_the_word_cap_keeps_words_before_pairs_and_is_documented_large() -> None:
    text = " ".join(f"w{a}{b}{c}x" for a in "abcdefghij" for b in "abcdefghij" for c in "abcdefg")  # 700 words
    terms = input_terms(text)
    assert len(terms) == MAX_TERMS >= 600 and all(" " not in t for t in terms)
    assert len(decode(extract_input_features(text))) == MAX_TERMS


def test_the_model_ranks_the_long_prompts_risky_word_as_well_as_the_oracle() -> None:
    model, tasks, events = _fitted()
    risk = model.predict_proba([clf.feature_dict(f) for f in events])
    for agent in PLANTED:
        mine = [i for i, t in enumerate(tasks) if t.agent == agent]
        failed = [tasks[i].failed for i in mine]
        oracle = roc_auc_score(failed, [tasks[i].risky for i in mine])
        assert roc_auc_score(failed, risk[mine]) > oracle - 0.03, agent


def _reasons(model: clf.RiskModel, features: dict, text: str) -> list[str]:
    names = clf.term_names(text)
    return [names.get(name, name) for name, _v, _c in model.reasons(model.prepare(clf.feature_dict(features)))]


def test_the_planted_word_is_the_first_reason_of_risky_tasks_and_absent_from_the_others() -> None:
    model, tasks, events = _fitted()
    for task, features in zip(tasks, events, strict=True):
        reasons = _reasons(model, features, task.text)
        word = PLANTED[task.agent]
        if task.risky:
            assert reasons and reasons[0] == word, (task.agent, task.text, reasons)
        else:
            assert word not in reasons, (task.agent, reasons)


def test_no_constant_and_no_size_is_a_reason() -> None:
    model, tasks, events = _fitted()
    shown = {name for task, features in zip(tasks, events, strict=True)
             for name, _v, _c in model.reasons(model.prepare(clf.feature_dict(features)))}
    assert not {n for n in shown if n.startswith(("agent=", "language=", "size_z:", "n_"))}, shown
