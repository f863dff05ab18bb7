"""Nearest past failures: ranked by shared content keywords, one per input, same agent first on ties."""

from __future__ import annotations

from retrylens.analytics.similar_failures import FailedTask, SimilarFailures, content_words


def _task(task_id: str, words: str, *, agent: str = "billing", fp: str = "", error: str = "logic") -> FailedTask:
    return FailedTask(task_id=task_id, agent=agent, fingerprint=fp or f"fp-{task_id}", words=frozenset(words.split()),
                      outcome="failed", error_type=error, group_id="00000000000000ab", last_seen=None)


def test_the_nearest_input_comes_first_with_its_shared_words_and_similarity():
    index = SimilarFailures("acme", [_task("far", "refund invoice weather garden"),
                                     _task("near", "refund invoice ledger audit")])
    found = index.nearest({"refund", "invoice", "ledger", "audit"})
    assert [n["task_id"] for n in found] == ["near", "far"]
    assert found[0]["similarity"] == 1.0 and found[0]["shared_words"] == ["audit", "invoice", "ledger", "refund"]
    assert found[1]["similarity"] == round(2 / 6, 3)
    assert found[0]["link"] == "task?project=acme&task_id=near"
    assert found[0]["group_link"] == "groups?project=acme&group=00000000000000ab"


def test_one_entry_per_input_and_known_bad_from_its_failed_tasks():
    tasks = [_task(f"t{i}", "refund invoice ledger", fp="same") for i in range(3)] + [_task("other", "refund invoice")]
    found = SimilarFailures("acme", tasks).nearest({"refund", "invoice", "ledger"})
    assert [n["task_id"] for n in found] == ["t0", "other"]  # the most recent (first listed) of the repeated input
    assert found[0]["known_bad"] is True and found[0]["input_failed_tasks"] == 3 and "known bad" in found[0]["words"]
    assert found[1]["known_bad"] is False


def test_one_shared_word_or_only_stop_words_is_not_similar():
    index = SimilarFailures("acme", [_task("a", "refund garden weather")])
    assert index.nearest({"refund", "ledger", "audit"}) == []
    assert SimilarFailures("acme", [_task("b", "the every refund")]).nearest({"the", "every", "since"}) == []


def test_the_same_agent_wins_a_tie_and_at_most_three_are_listed():
    tasks = [_task("other-agent", "refund invoice", agent="support"), _task("same-agent", "refund invoice")]
    tasks += [_task(f"x{i}", "refund invoice") for i in range(5)]
    found = SimilarFailures("acme", tasks).nearest({"refund", "invoice"}, agent="billing")
    assert len(found) == 3 and found[0]["task_id"] == "same-agent"
    assert SimilarFailures("acme", tasks).nearest({"refund", "invoice"})[0]["task_id"] == "other-agent"


def test_content_words_are_the_keywords_without_stop_words():
    assert content_words({"kw:every": True, "kw:refund": True, "kw:ledger": False, "n_chars": 10}) == {"refund"}
