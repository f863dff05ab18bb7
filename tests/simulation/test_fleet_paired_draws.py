"""A task's randomness is its own: advice given to one task leaves every other task's run alone.

The demo's A/B runs the same seeded tasks with and without pre-check advice and pairs them
task by task. When the governors drew backoff jitter, shadow exploration and ids from one
stream shared by the whole fleet, a task stopped one attempt earlier shifted every later
task's draws, so tasks that got no advice at all ended differently in the two arms and the
A/B's cost figure moved by chance (session 8: +7 µUSD per unadvised task, CI −19…+32).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from retrylens.sdk.core.preflight import PrecheckResponse, Recommendation, apply_advice
from retrylens.simulation import load_scenario, run_fleet

START = datetime(2026, 11, 1, tzinfo=UTC)


class _ReviewOne:
    """A pre-flight client that sends one task to a person before it spends anything."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id

    def adapt(self, run: Any) -> None:
        if run.state.task_id == self.task_id:
            apply_advice(
                run, PrecheckResponse(risk=1.0, recommended=Recommendation(human_review=True))
            )


def _runs(tallies: list[Any]) -> dict[str, Any]:
    return {
        t.task_id: (t.outcome, round(t.cost_usd, 10), [vars(a) for a in t.log]) for t in tallies
    }


def test_advice_to_one_task_changes_no_other_tasks_run() -> None:
    scenario = load_scenario()
    plain = run_fleet(scenario, tasks=120, seed=3, start=START)
    # the first task that retried: it drew backoff jitter that later tasks would otherwise draw
    target = next(t.task_id for t in plain.tallies if len(t.log) > 1)
    advised = run_fleet(
        scenario, tasks=120, seed=3, start=START, preflight=lambda _p: _ReviewOne(target)
    )
    before, after = _runs(plain.tallies), _runs(advised.tallies)
    assert (
        after.pop(target)[2] == [] and before.pop(target)[2] != []
    )  # the advised task ran nothing
    assert after == before
