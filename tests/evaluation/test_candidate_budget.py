"""A candidate's ``budget.max_attempts`` means what the SDK says it means, and the changed
fields shown to the user say what the candidate really changes.

The demo's live policy (the default scenario's) has the older fixed budget
``max_attempts: 5`` (4 retries, none earned per step). Its "aggressive" candidate said
``budget: {max_attempts: 8}``; merged over the live policy's dumped budget (which carries
the allowance fields ``retries: 4, max_retries: 4``), the 8 became a cap above the
allowance: the report showed "budget.max_attempts 5 → 8" for a candidate that allowed
exactly as many attempts as the live policy. A budget that names ``max_attempts`` and no
allowance field is a fixed count (``TaskBudget``'s rule), in a candidate file too.
"""

from __future__ import annotations

from retrylens import simulation
from retrylens.cli.demo_loop import CANDIDATES
from retrylens.evaluation.candidates import describe_changes, overlay, policy_changes
from retrylens.sdk.core.policy import parse_policy
from retrylens.simulation.fleet import fleet_policy

LIVE = parse_policy({"id": "live", "budget": {"max_attempts": 5}})


def test_a_candidate_max_attempts_over_a_fixed_live_budget_is_that_many_attempts() -> None:
    more = overlay(LIVE, {"budget": {"max_attempts": 8}}, source="more")
    fewer = overlay(LIVE, {"budget": {"max_attempts": 3}}, source="fewer")
    assert [more.budget.most_attempts, fewer.budget.most_attempts] == [8, 3]
    assert more.budget.allowance(0) == 7 and fewer.budget.allowance(0) == 2


def test_the_changed_fields_name_what_the_budget_really_changes() -> None:
    more = overlay(LIVE, {"budget": {"max_attempts": 8}}, source="more")
    changed = {c["field"]: (c["live"], c["candidate"]) for c in policy_changes(LIVE, more)}
    assert changed == {"budget.max_attempts": (5, 8), "budget.retries": (4, 7), "budget.max_retries": (4, 7)}


def test_a_candidate_that_sets_the_allowance_keeps_its_own_fields() -> None:
    own = overlay(LIVE, {"budget": {"retries": 2, "max_retries": 2}}, source="own")
    assert own.budget.allowance(0) == 2 and own.budget.max_attempts == 5


def test_the_demos_candidates_change_the_attempts_they_claim_to() -> None:
    live = fleet_policy(simulation.load_scenario())
    for name, changes in CANDIDATES.items():
        candidate = overlay(live, {"id": name, **changes}, source=name)
        claimed = changes["budget"]["max_attempts"]
        assert candidate.budget.most_attempts == claimed, (name, describe_changes(policy_changes(live, candidate)))
        assert candidate.budget.allowance(0) == claimed - 1
