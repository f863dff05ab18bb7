"""A chain calls only the rules that can answer for the failure's class, and decides the same.

Each rule says which failure classes it can answer for (``Rule.answers_for``, fixed by its
parameters); :class:`~retrylens.sdk.core.rules.FirstOf` precomputes per class the rules to
ask. These tests hold that to the plain top-to-bottom walk: a rule returns ``None`` for
every class outside its set, over random states and environments, and a chain's verdict
equals the walk's verdict for random policies.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from retrylens.schemas import AgentRef, ErrorType
from retrylens.sdk.core import rules as r
from retrylens.sdk.core.policy import RetryPolicy, TaskBudget
from retrylens.sdk.core.rules import compile_policy, record_failure
from retrylens.sdk.core.state import TaskState
from retrylens.sdk.text.sanitizer import Failure

PHASES = ("planning", "execution")
PROPERTY = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
error_types = st.sampled_from(list(ErrorType))


class World:
    """An environment whose fleet signals are drawn: breaker, throttle, known-bad input."""

    def __init__(self, now: float, breaker: bool, allowed: bool, seen: int, handoff: bool) -> None:
        self.t, self.breaker, self.allowed, self.seen, self.handoff = (
            now,
            breaker,
            allowed,
            seen,
            handoff,
        )

    def now(self) -> float:
        return self.t

    def breaker_open(self, dependency: str) -> bool:
        return self.breaker

    def retry_allowed(self, dependency: str) -> bool:
        return self.allowed

    def fingerprint_failures(self, fingerprint: str) -> int:
        return self.seen

    def can_handoff(self) -> bool:
        return self.handoff


@st.composite
def task_states(draw: st.DrawFn) -> TaskState:
    world = World(
        draw(st.floats(0, 100)),
        draw(st.booleans()),
        draw(st.booleans()),
        draw(st.integers(0, 5)),
        draw(st.booleans()),
    )
    s = TaskState(
        task_id="t",
        project="p",
        agent=AgentRef(name=draw(st.sampled_from(["a", "b"]))),
        goal="g",
        fingerprint="f",
        features={},
        trace_id="0" * 32,
        root_span_id="0" * 16,
        env=draw(st.none() | st.just(world)),
    )
    s.dependency = draw(st.sampled_from(["", "llm", "search"]))
    for _ in range(draw(st.integers(1, 6))):
        s.phase = draw(st.sampled_from(PHASES))
        s.attempt += 1
        s.last_failure = Failure(
            draw(error_types),
            retryable=draw(st.booleans()),
            retry_after_ms=draw(st.none() | st.integers(0, 5_000)),
        )
        record_failure(s, "")
    s.ledger.attempts = draw(st.integers(0, 8))
    s.degradations = draw(st.integers(0, 3))
    s.relaxed = draw(st.booleans())
    s.extra_try_used = draw(st.booleans())
    s.ambiguous = draw(st.none() | st.just("send_mail"))
    s.rng = random.Random(draw(st.integers(0, 9)))
    return s


fallbacks = st.dictionaries(st.sampled_from(["llm", "search"]), st.just("backup"), max_size=2)
RULES = st.one_of(
    st.builds(r.stop_when_cancelled),
    st.builds(
        r.stop_when_killed, project=st.booleans(), agents=st.sets(st.sampled_from(["a", "c"]))
    ),
    st.builds(r.hand_off_unclassified, st.integers(0, 3)),
    st.builds(r.stop_on_known_bad_input, st.integers(0, 4)),
    st.builds(r.stop_at_phase_cap, st.dictionaries(st.sampled_from(PHASES), st.integers(0, 4))),
    st.builds(r.protect_dependency, fallbacks),
    st.builds(
        r.degrade_after_failures,
        st.integers(1, 3),
        max_degradations=st.integers(0, 3),
        fallbacks=fallbacks,
    ),
)
policies = st.builds(
    RetryPolicy,
    budget=st.builds(
        TaskBudget, max_attempts=st.integers(1, 8), deadline_s=st.none() | st.floats(1, 100)
    ),
    phase_caps=st.dictionaries(st.sampled_from(PHASES), st.integers(0, 4)),
    degrade_after=st.integers(1, 3),
    fallbacks=fallbacks,
)


def walk(chain: r.FirstOf, state: TaskState) -> r.Verdict | None:
    """The chain's meaning: ask every rule top to bottom, the first answer decides."""
    return next((v for rule in chain.rules if (v := rule(state)) is not None), None)


@PROPERTY
@given(RULES, task_states(), error_types)
def test_a_rule_is_silent_for_the_classes_it_does_not_answer_for(rule, state, error) -> None:
    scope = rule.answers_for()
    assert scope is not None
    if error not in scope:
        state.last_failure = Failure(error, retryable=state.last_failure.retryable)
        state.failures[-1].error_type = error
        assert rule(state) is None, (rule, error)


@PROPERTY
@given(policies, task_states())
def test_a_compiled_chain_decides_as_the_walk_over_all_its_rules(policy, state) -> None:
    chain = compile_policy(policy)
    state.rng = random.Random(1)  # the jittered wait draws from it: both see the same draw
    verdict = chain(state)
    state.rng = random.Random(1)
    assert verdict == walk(chain, state)


def test_a_chain_does_not_ask_a_rule_about_a_class_it_cannot_answer_for() -> None:
    asked: list[ErrorType] = []

    class only_cancellations(r.Rule):  # noqa: N801
        def answers_for(self) -> frozenset[ErrorType]:
            return frozenset({ErrorType.CANCELLED})

        def __call__(self, s: TaskState) -> r.Verdict | None:
            asked.append(s.last_failure.error_type)
            return None

    def plain(s: TaskState) -> r.Verdict | None:  # a plain function answers for any class
        asked.append(s.last_failure.error_type)
        return None

    chain = only_cancellations() | plain | r.retry_by_class()
    state = TaskState(
        task_id="t",
        project="p",
        agent=AgentRef(name="a"),
        goal="g",
        fingerprint="f",
        features={},
        trace_id="0" * 32,
        root_span_id="0" * 16,
    )
    for error in (ErrorType.TIMEOUT, ErrorType.CANCELLED):
        state.attempt += 1
        state.last_failure = Failure(error)
        record_failure(state, "")
        verdict = chain(state)
        assert verdict is not None and verdict.rule == "retry_by_class"
    assert asked == [ErrorType.TIMEOUT, ErrorType.CANCELLED, ErrorType.CANCELLED]
    assert chain.answers_for() is None  # the plain function makes it any class
    assert (r.stop_when_cancelled() | r.hand_off_unclassified()).answers_for() == {
        ErrorType.CANCELLED,
        ErrorType.UNKNOWN,
    }


def test_a_shadow_candidate_is_parsed_once_per_policy_and_equals_a_fresh_parse() -> None:
    from retrylens.sdk.core.policy import parse_policy

    policy = parse_policy({"shadow": {"candidate": {"caps": {"timeout": 0}}}})
    first = policy.candidate()
    assert first is not None and first is policy.candidate()  # the governor asks per failure
    assert first.cap(ErrorType.TIMEOUT) == 0 and first.shadow.candidate is None
    twin = parse_policy({"shadow": {"candidate": {"caps": {"timeout": 0}}}})
    assert twin.candidate() == first and twin.candidate() is not first  # per policy object
    assert parse_policy({}).candidate() is None
