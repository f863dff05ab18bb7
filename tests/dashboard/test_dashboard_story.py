"""The task view's story: attempts folded from events, echoed messages and carried errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from retrylens.dashboard.story import attempt_rows, build_story

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _event(second: int, attempt: int, kind: str, **fields) -> dict:
    return {"ts": T0 + timedelta(seconds=second), "attempt": attempt, "kind": kind,
            "correlation_id": fields.pop("correlation_id", f"c{attempt}"), **fields}


def _context(digests: list[str], messages: list[tuple[str, str]]) -> str:
    return json.dumps({"message_count": len(digests), "token_count": 100 * len(digests),
                       "message_digests": digests,
                       "last_messages": [{"role": r, "content": c} for r, c in messages]})


def test_attempts_are_folded_in_order_with_decision_and_backoff():
    rows = [
        _event(0, 0, "task_started", correlation_id="task"),
        _event(1, 1, "attempt_started"),
        _event(2, 1, "attempt_failed", error_type="timeout", error_message="TimeoutError: tool did not answer"),
        _event(2, 1, "decision", decision="retry_backoff", decision_reason="transient", backoff_ms=500),
        _event(3, 2, "attempt_started"),
        _event(4, 2, "attempt_succeeded", tokens_in=10, tokens_out=5, cost_usd=0.01),
        _event(4, 2, "task_finished", correlation_id="task", outcome="succeeded"),
    ]
    story = build_story("acme", "t1", list(reversed(rows)))
    assert [a.attempt for a in story.attempts] == [1, 2]
    first, second = story.attempts
    assert (first.status, first.decision, first.backoff_ms) == ("failed", "retry_backoff", 500)
    assert (second.status, second.tokens, story.outcome) == ("succeeded", 15, "succeeded")


def test_a_repeated_user_message_is_marked_as_an_echo():
    context = _context(["a", "b"], [("user", "refund order 7"), ("user", "refund order 7")])
    story = build_story("acme", "t1", [_event(1, 1, "attempt_failed", context_snapshot=context)])
    assert story.attempts[0].echoed_messages == [1]
    assert "echoed duplicate message" in story.attempts[0].warnings


def test_a_digest_repeated_from_the_previous_attempt_is_an_echo():
    rows = [_event(1, 1, "attempt_failed", context_snapshot=_context(["a", "b"], [])),
            _event(2, 2, "attempt_failed", context_snapshot=_context(["b", "c"], []))]
    story = build_story("acme", "t1", rows)
    assert story.attempts[0].echoed_digests == []
    assert story.attempts[1].echoed_digests == [0]


def test_an_earlier_error_inside_a_retry_context_is_a_carried_error():
    error = "ValidationError: field 'total' is missing from the answer"
    rows = [
        _event(1, 1, "attempt_failed", error_type="validation", error_message=error),
        _event(2, 2, "attempt_failed", context_snapshot=_context(["x"], [("tool", f"previous run: {error}")])),
        _event(3, 3, "attempt_succeeded", context_snapshot=_context(["y"], [("user", "try again")])),
    ]
    story = build_story("acme", "t1", rows)
    assert [a.carried_from for a in story.attempts] == [[], [1], []]
    assert attempt_rows(story)[1]["warnings"] == "carries the error of attempt 1"


def test_side_effects_keep_their_idempotency_keys():
    effects = json.dumps([{"tool": "payments.refund", "idempotency_key": "refund:1", "status": "committed"}])
    story = build_story("acme", "t1", [_event(1, 1, "side_effect", side_effects=effects)])
    assert story.attempts[0].side_effects[0]["idempotency_key"] == "refund:1"


def test_decoded_api_rows_read_like_stored_rows():
    snapshot = {"message_digests": ["a", "a"], "last_messages": [], "message_count": 2, "token_count": 9}
    story = build_story("acme", "t1", [_event(1, 1, "attempt_failed", context_snapshot=snapshot, side_effects=[])])
    assert story.attempts[0].echoed_digests == [1]


def test_the_task_view_shows_loop_and_pollution_signals_from_the_store(store):
    """A governed attempt that loops on one tool and ends its context with two errors."""
    import random

    from retrylens.ingest.processor import SourceRef, process
    from retrylens.sdk import Governor, parse_policy
    from retrylens.testing import capture_events

    policy = parse_policy({"backoff": {"jitter": 0.0, "base_ms": 1, "cap_ms": 2}})
    error = {"role": "tool", "content": "Error: status 503 from search", "error": True}
    with capture_events() as captured:
        g = Governor(policy, project="story-loops", emit=captured.emit, rng=random.Random(1))

        def work(attempt):
            if attempt.number == 1:
                for _ in range(4):
                    attempt.tool_call("search", {"q": "oslo"})
                attempt.messages.extend([error, error])
                raise TimeoutError("search timed out")
            return "ok"

        g.call(work, goal="find a hotel", task_id="t-loop")
        store.insert_rows([process(v, SourceRef("t", 0, i)).row for i, (_, v) in enumerate(captured.records())])
    story = build_story("story-loops", "t-loop", store.task_events("story-loops", "t-loop"))
    first = story.attempts[0]
    assert (first.trailing_errors, first.repeated_tool_calls) == (2, 3)
    assert first.recent_error_share > 0
    assert "tool loop: 3 call(s) identical to the one before" in first.warnings
    assert "context ends with 2 error messages" in first.warnings
    row = attempt_rows(story)[0]
    assert (row["trailing_errors"], row["repeated_tool_calls"]) == (2, 3)


def test_a_recovered_task_is_told_apart_from_a_clean_success(store):
    """Stored events of a task that succeeded on its second attempt, and of a first-try one."""
    import random

    from retrylens.ingest.processor import SourceRef, process
    from retrylens.sdk import Governor, parse_policy
    from retrylens.testing import capture_events

    policy = parse_policy({"backoff": {"jitter": 0.0, "base_ms": 1, "cap_ms": 2}})
    with capture_events() as captured:
        g = Governor(policy, project="story-kinds", emit=captured.emit, rng=random.Random(2))

        def flaky(attempt):
            if attempt.number == 1:
                raise TimeoutError("slow")
            return "ok"

        g.call(flaky, goal="recover", task_id="t-recovered")
        g.call(lambda: "ok", goal="clean", task_id="t-clean")
        store.insert_rows([process(v, SourceRef("t", 0, i)).row for i, (_, v) in enumerate(captured.records())])
    kinds = {t: build_story("story-kinds", t, store.task_events("story-kinds", t)).outcome_kind
             for t in ("t-recovered", "t-clean")}
    assert kinds == {"t-recovered": "successful_with_retry", "t-clean": "successful_without_retry"}


def _handed_off_task(store, project: str, task_id: str) -> None:
    """A real governed task handed to a person (an unclassified error), stored via the processor."""
    import random

    from retrylens.errors import HandedOff
    from retrylens.ingest.processor import SourceRef, process
    from retrylens.sdk import CallbackChannel, Governor, parse_policy
    from retrylens.testing import capture_events

    policy = parse_policy({"backoff": {"jitter": 0.0, "base_ms": 1, "cap_ms": 2}})
    with capture_events() as captured:
        g = Governor(policy, project=project, emit=captured.emit, rng=random.Random(3),
                     handoff=CallbackChannel(lambda package: None))

        def work(attempt):
            attempt.messages.append({"role": "tool", "content": "balance: 12.00 EUR"})
            raise RuntimeError("ledger returned an inconsistent balance for order 42")

        with pytest.raises(HandedOff):
            g.call(work, goal="refund order 42, api key sk-proj-abcdefghijklmnopqrstuvwx1234", task_id=task_id)
        store.insert_rows([process(v, SourceRef("t", 0, i)).row for i, (_, v) in enumerate(captured.records())])


def test_the_stored_handoff_package_is_read_back_whole_and_redacted(store):
    _handed_off_task(store, "story-handoff", "t-handoff")
    story = build_story("story-handoff", "t-handoff", store.task_events("story-handoff", "t-handoff"))
    [package] = story.handoff_packages
    assert "unclassified failure" in package.reason
    assert package.input.startswith("refund order 42")
    assert "sk-proj-abcdefghijklmnopqrstuvwx1234" not in package.input
    assert package.error["code"] == "RuntimeError"
    assert "inconsistent balance" in package.error["message"]
    assert [e["attempt"] for e in package.errors] == [1]
    assert {"role": "tool", "content": "balance: 12.00 EUR"} in package.context
    assert package.raw == {}


def test_a_handoff_package_cut_to_the_stored_size_is_shown_as_text():
    snapshot = {"last_messages": [{"role": "handoff:input", "content": "do it"},
                                  {"role": "handoff:errors", "content": '[{"attempt": 1, "summ…'}]}
    story = build_story("acme", "t1", [_event(0, 0, "handoff", context_snapshot=snapshot, side_effects=[],
                                              decision_reason="needs a person")])
    [package] = story.handoff_packages
    assert (package.reason, package.input, package.errors) == ("needs a person", "do it", [])
    assert package.raw == {"errors": '[{"attempt": 1, "summ…'}
