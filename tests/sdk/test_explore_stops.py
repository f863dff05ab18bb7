"""Stop exploration: where the live rules stop and the shadow candidate retries, take its retry at a stated rate."""

from __future__ import annotations

import random

from retrylens.schemas.taxonomy import Decision
from retrylens.sdk.core.policy import parse_policy
from retrylens.sdk.core.shadow import explore_stop
from retrylens.sdk.core.verdicts import Verdict

STOP = Verdict(Decision.GIVE_UP, "cap reached for logic (0)")
RETRY = Verdict(Decision.REBUILD_CONTEXT, "retry logic (1 of 2)", backoff_ms=0)


def test_the_candidates_retry_is_taken_at_the_stated_rate_with_its_propensity() -> None:
    rng = random.Random(5)
    taken = [explore_stop(STOP, RETRY, 0.25, rng) for _ in range(4000)]
    retried = [t for t in taken if t.verdict.retrying]
    assert 0.22 < len(retried) / len(taken) < 0.28
    assert {t.propensity for t in retried} == {0.25}
    assert {t.propensity for t in taken if not t.verdict.retrying} == {0.75}
    assert retried[0].verdict.decision is Decision.REBUILD_CONTEXT
    assert "instead of give_up" in retried[0].verdict.reason  # the log's replay reads the live decision here


def test_a_stop_the_candidate_shares_or_a_live_retry_is_never_explored() -> None:
    rng = random.Random(1)
    assert all(explore_stop(STOP, STOP, 0.5, rng).verdict is STOP for _ in range(200))
    assert all(explore_stop(RETRY, RETRY, 0.5, rng).verdict is RETRY for _ in range(200))


def test_stop_exploration_is_off_unless_a_policy_asks_for_it() -> None:
    assert parse_policy({}).shadow.explore_stops == 0.0
    assert parse_policy({"shadow": {"explore_stops": 0.2}}).shadow.explore_stops == 0.2
