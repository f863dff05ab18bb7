"""Every replayed rule and wait: its vectorised twin equals the scalar rule the governor runs.

The twins read the rule objects' parameters (:mod:`retrylens.evaluation.vectorised`);
these properties hold them to ``rule(state)`` / ``wait(view)`` over random task states,
and a replay of candidate chains through the vectorised path to the scalar chain called
on every logged task state.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
from eval_helpers import example_candidates
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from retrylens.evaluation import vectorised as v
from retrylens.evaluation.ground_truth import history_of, run_policy_events
from retrylens.evaluation.limits import (
    STOP_DIMENSIONS,
    Limits,
    backoff_under,
    history_frame,
    stop_matrix,
)
from retrylens.evaluation.replay import replay_policy
from retrylens.evaluation.replay_loop import ReplayEnv, scalar_stop_matrix, scalar_waits
from retrylens.schemas import AgentRef, ErrorType
from retrylens.sdk.core import backoff as b
from retrylens.sdk.core import rules as r
from retrylens.sdk.core.policy import TaskBudget
from retrylens.sdk.core.rules import record_failure
from retrylens.sdk.core.state import TaskState
from retrylens.sdk.text.sanitizer import Failure
from retrylens.simulation import fleet_policy, load_scenario

PHASES = ("planning", "execution", "review")
#: a few classes drawn often, so that caps, class changes and extra tries meet
FEW = [ErrorType.TIMEOUT, ErrorType.LOGIC, ErrorType.CONTEXT_OVERFLOW, ErrorType.UNKNOWN]
error_types = st.one_of(st.sampled_from(FEW), st.sampled_from(list(ErrorType)))
PROPERTY = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Draw(random.Random):
    """An rng whose every draw is ``value``: the scalar wait sees the frame's ``draw``."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


#: small whole numbers too, so that limits are sometimes met exactly
seconds = st.integers(0, 6).map(float) | st.floats(0, 200, allow_nan=False)
counts = st.integers(1, 6) | st.integers(1, 20_000)


@st.composite
def task_states(draw: st.DrawFn) -> TaskState:
    """A state just after a failure: a random failure history, spend, clock and adaptations."""
    s = TaskState(task_id="t", project="p", agent=AgentRef(name="a"), goal="g", fingerprint="f",
                  features={}, trace_id="0" * 32, root_span_id="0" * 16,
                  env=ReplayEnv(draw(seconds)))
    for _ in range(draw(st.integers(1, 7))):
        s.phase = draw(st.sampled_from(PHASES))
        s.attempt += 1
        s.last_failure = Failure(draw(error_types), retryable=draw(st.booleans()),
                                 retry_after_ms=draw(st.none() | st.integers(0, 120_000)))
        record_failure(s, "")
    s.ledger.started_at = draw(seconds)
    s.ledger.attempts = draw(st.integers(0, 12))
    s.ledger.steps = draw(st.integers(0, 30))
    s.ledger.tokens = draw(counts)
    s.ledger.cost_usd = draw(st.floats(0, 2, allow_nan=False))
    s.degradations = draw(st.integers(0, 3))
    s.extra_try_used = draw(st.booleans())
    s.retries = draw(st.integers(0, 40))
    s.rng = Draw(draw(st.floats(0, 1, exclude_max=True, allow_nan=False)))
    return s


caps_by_class = st.dictionaries(error_types, st.integers(0, 5))
legacy_budgets = st.builds(
    TaskBudget, max_attempts=st.integers(1, 12) | st.just(99), max_tokens=st.none() | counts,
    max_cost_usd=st.none() | st.floats(0.01, 2), deadline_s=st.none() | seconds.filter(lambda x: x > 0),
)


@st.composite
def allowance_budgets(draw: st.DrawFn) -> TaskBudget:
    """A retry allowance that grows with steps (issue 24), sometimes with a fixed cap too."""
    base = draw(st.integers(0, 8))
    return TaskBudget(
        retries=base, retries_per_step=draw(st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 1.0, 2.0]) | st.floats(0, 3)),
        max_retries=base + draw(st.integers(0, 20)), max_attempts=draw(st.none() | st.integers(1, 12)),
        max_tokens=draw(st.none() | counts),
    )


budgets = legacy_budgets | allowance_budgets()
handoff = st.booleans()
STOP_RULES: dict[type, st.SearchStrategy[r.StopRule]] = {
    r.stop_unless_retryable: st.builds(r.stop_unless_retryable, st.sets(error_types), handoff=handoff),
    r.stop_on_budget: st.builds(r.stop_on_budget, budgets, handoff=handoff),
    r.stop_at_phase_cap: st.builds(
        r.stop_at_phase_cap, st.dictionaries(st.sampled_from(PHASES), st.integers(0, 6)), handoff=handoff
    ),
    r.stop_at_class_cap: st.builds(r.stop_at_class_cap, caps_by_class, max_degradations=st.integers(0, 3),
                                   extra_try_on_type_change=st.booleans(), handoff=handoff),
    r.hand_off_unclassified: st.builds(r.hand_off_unclassified, st.integers(0, 4), handoff=handoff),
}
leaf_waits = st.one_of(
    st.builds(b.wait_none),
    st.builds(b.wait_exponential, st.integers(0, 5_000), cap_ms=st.integers(0, 60_000)),
    st.builds(b.wait_exponential, st.floats(0, 5_000), cap_ms=st.floats(0, 60_000)),
    st.builds(b.wait_retry_after, max_ms=st.integers(0, 120_000)),
)
jitters = st.builds(b.jitter, st.floats(0, 1), full=st.booleans())


def _extend(children: st.SearchStrategy[b.Wait]) -> st.SearchStrategy[b.Wait]:
    return st.one_of(
        st.tuples(children, children).map(lambda p: p[0] + p[1]),
        st.tuples(children, children).map(lambda p: p[0] | p[1]),
        st.tuples(children, jitters).map(lambda p: p[0] * p[1]),
    )


waits = st.recursive(leaf_waits, _extend, max_leaves=5)


def test_every_replayed_rule_and_wait_type_has_a_vectorised_twin() -> None:
    replayed = {type(rule) for rule in v.replayed_stops(r.compile_policy(fleet_policy(load_scenario())))}
    assert replayed == set(v.STOPS) == set(STOP_RULES)
    assert {kind.name for kind in v.STOPS} == set(STOP_DIMENSIONS)
    assert {b.wait_none, b.wait_exponential, b.wait_retry_after, b._Combined, b._Jittered,
            r.retry_by_class} == set(v.WAITS)


@pytest.mark.parametrize("kind", list(STOP_RULES), ids=lambda kind: kind.name)
@PROPERTY
@given(data=st.data(), states=st.lists(task_states(), min_size=1, max_size=6))
def test_a_stop_rules_vectorised_form_equals_the_rule(kind: type, data: st.DataObject,
                                                      states: list[TaskState]) -> None:
    rule = data.draw(STOP_RULES[kind])
    frame = v.Frame.from_states(states, [s.rng.value for s in states])
    vector = v.stops(rule, frame)
    scalar = [rule(s) is not None for s in states]
    assert vector.tolist() == scalar, repr(rule)


@PROPERTY
@given(wait=waits, states=st.lists(task_states(), min_size=1, max_size=6))
def test_a_waits_vectorised_form_equals_the_wait(wait: b.Wait, states: list[TaskState]) -> None:
    frame = v.Frame.from_states(states, [s.rng.value for s in states])
    views = [SimpleNamespace(retries=s.retries + 1, retry_after_ms=s.retry_after_ms, rng=s.rng) for s in states]
    assert v.wait_ms(wait, frame).tolist() == [float(wait(view)) for view in views], repr(wait)


@PROPERTY
@given(wait=waits, states=st.lists(task_states(), min_size=1, max_size=6))
def test_retry_by_class_vectorised_backoff_equals_its_verdicts(wait: b.Wait, states: list[TaskState]) -> None:
    rule = r.retry_by_class(wait)
    frame = v.Frame.from_states(states, [s.rng.value for s in states])
    verdicts = [rule(s) for s in states]
    assert v.wait_ms(rule, frame).tolist() == [float(x.backoff_ms) for x in verdicts if x is not None]


def test_a_rule_without_a_twin_says_so() -> None:
    with pytest.raises(KeyError, match="break_loops"):
        v.stops(r.break_loops(), v.Frame.from_states([], []))


# -- a whole replay: vectorised path = the scalar chain called on every logged state ---------------
@pytest.fixture(scope="module")
def logged():  # noqa: ANN201
    scenario = load_scenario()
    live = fleet_policy(scenario)
    h = history_of(run_policy_events(scenario, tasks=200, seed=5))
    user_chain = (
        r.stop_on_budget(TaskBudget(max_attempts=3, deadline_s=4.0))
        | r.stop_at_class_cap({ErrorType.TIMEOUT: 1, ErrorType.LOGIC: 0}, extra_try_on_type_change=False)
        | r.retry_by_class(wait=b.wait_exponential(50, cap_ms=400) * b.jitter(0.5, full=True) + b.wait_none())
    )
    return live, h, {**example_candidates(live), "user_chain": user_chain}


def test_candidate_stops_and_waits_decided_vectorised_equal_the_scalar_chain(logged) -> None:  # noqa: ANN001
    live, h, candidates = logged
    ref = Limits.of(live, h.phases, name="live")
    elapsed = history_frame(h, ref).elapsed_s * 1000.0 + h.backoff.cumsum() % 997  # any clock will do
    assert h.failed.sum() > 100
    for name, candidate in {"live": live, **candidates}.items():
        lim = Limits.of(candidate, h.phases, name=name)
        vector = stop_matrix(h, lim, elapsed, ref)
        scalar = scalar_stop_matrix(h, lim, ref, elapsed) & h.failed
        assert np.array_equal(vector, scalar), name
        assert np.array_equal(backoff_under(h, lim, ref), scalar_waits(h, lim, ref)), name
    assert stop_matrix(h, Limits.of(candidates["conservative"], h.phases), elapsed, ref).any()


def test_a_user_chain_replays_as_a_candidate(logged) -> None:  # noqa: ANN001
    live, h, candidates = logged
    result = replay_policy(h, candidates["user_chain"], live)
    assert result.truncated.any()
    assert (result.per_task["attempts"][result.truncated] <= 3).all()
