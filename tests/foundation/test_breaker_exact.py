"""The invalid-burst breaker held to its definition, verdict by verdict (no store, no broker).

The breaker trips on ``max_consecutive`` invalid messages in a row, or when its window is full
and more than ``max_ratio`` of it is invalid; a clean chunk recorded in bulk counts as that many
valid verdicts. These tests compare it with the definition written out plainly (a list of the
last ``window`` verdicts), so that a mistake in its running counts (mutation target
``breaker``) shows as a different answer on some verdict, not only as a wrong total.
"""

from __future__ import annotations

import random

from retrylens.ingest.breaker import InvalidBurstBreaker


class _Definition:
    """The breaker's rule with nothing kept incrementally: what the breaker must answer."""

    def __init__(self, max_consecutive: int, max_ratio: float, window: int) -> None:
        self.max_consecutive, self.max_ratio, self.window = max_consecutive, max_ratio, window
        self.seen: list[bool] = []

    def record(self, valid: bool) -> str | None:
        self.seen.append(valid)
        run = 0
        for verdict in reversed(self.seen):
            if verdict:
                break
            run += 1
        if valid:
            return None
        if run >= self.max_consecutive:
            return f"{run} consecutive invalid messages (limit {self.max_consecutive})"
        recent = self.seen[-self.window:]
        invalid = recent.count(False)
        if len(recent) == self.window and invalid / self.window > self.max_ratio:
            return f"{invalid} of the last {self.window} messages invalid (limit {self.max_ratio:.0%})"
        return None


def test_every_verdict_is_answered_as_the_definition_answers_it() -> None:
    rng = random.Random(38)
    trips = {"consecutive": 0, "ratio": 0}
    for _ in range(300):
        limits = dict(max_consecutive=rng.randrange(2, 7), max_ratio=rng.choice([0.2, 0.25, 0.5]),
                      window=rng.choice([4, 5, 8]))
        breaker, definition = InvalidBurstBreaker(**limits), _Definition(**limits)  # type: ignore[arg-type]
        for _step in range(rng.randrange(1, 10)):
            if rng.random() < 0.3:
                run = rng.randrange(-1, 2 * limits["window"])  # type: ignore[operator]
                breaker.record_valid(run)
                for _v in range(max(run, 0)):
                    definition.record(True)
                continue
            for _v in range(rng.randrange(1, 12)):
                valid = rng.random() < 0.5
                answer = breaker.record(valid)
                assert answer == definition.record(valid), (limits, definition.seen)
                if answer:
                    trips["consecutive" if "consecutive" in answer else "ratio"] += 1
    assert min(trips.values()) > 50  # both rules were exercised, many times


def test_the_ratio_trips_only_over_its_limit_and_only_on_a_full_window() -> None:
    breaker = InvalidBurstBreaker(max_consecutive=100, max_ratio=0.5, window=4)
    assert [breaker.record(v) for v in (False, True, False)] == [None, None, None]  # not full yet
    assert breaker.record(True) is None  # 2 of 4 is the limit, not over it
    assert breaker.record(False) is None  # the first invalid one fell out: still 2 of 4
    assert breaker.record(False) == "3 of the last 4 messages invalid (limit 50%)"
    breaker.record_valid(3)  # the oldest three fall out; the last invalid one stays counted
    assert breaker.record(False) is None  # T T T F: 1 of 4
    assert breaker.record(False) is None  # 2 of 4
    assert breaker.record(False) == "3 of the last 4 messages invalid (limit 50%)"


def test_a_clean_chunk_breaks_a_run_of_invalid_messages_and_an_empty_one_does_not() -> None:
    breaker = InvalidBurstBreaker(max_consecutive=3, max_ratio=1.0, window=4)
    assert [breaker.record(False) for _ in range(2)] == [None, None]
    breaker.record_valid(1)
    assert [breaker.record(False) for _ in range(2)] == [None, None]
    breaker.record_valid(0)  # no verdict at all: the run goes on
    breaker.record_valid(-1)
    assert breaker.record(False) == "3 consecutive invalid messages (limit 3)"


def test_a_window_as_large_as_the_default_forgets_what_leaves_it() -> None:
    """The default window is 2,000 (``dlq_window``): past CPython's cached small ints, a length
    equal to the window is another int object, so it must be compared by value."""
    breaker = InvalidBurstBreaker(max_consecutive=10_000, max_ratio=0.5, window=2_000)
    for valid in [False] * 1_000 + [True] * 1_000 + [True] * 1_000:  # the invalid thousand leaves
        assert breaker.record(valid) is None
    assert breaker.record(False) is None  # 1 of 2,000 invalid, not 1,001
    assert breaker._invalid_in_window == 1


def test_a_window_as_large_as_the_default_trips_on_its_ratio() -> None:
    breaker = InvalidBurstBreaker(max_consecutive=10_000, max_ratio=0.5, window=2_000)
    answers = [breaker.record(valid) for valid in [True] * 1_000 + [False] * 1_001]
    assert answers[:-1] == [None] * 2_000  # 1,000 of 2,000 is the limit, not over it
    assert answers[-1] == "1001 of the last 2000 messages invalid (limit 50%)"
