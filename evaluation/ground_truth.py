"""Ground truth for the estimators: every candidate is also really run on the same fleet.

The live policy runs the seeded simulated fleet with its shadow candidate and
exploration, and its events are the log the estimators read. Then each candidate runs
the *same* seeded fleet (same tasks, same per-task fault streams) under the real
governor, without exploration; its own events give its true metrics. Comparing the
estimates made from the live log with those truths is how RetryLens checks that replay
and the off-policy estimators say what would really have happened.

This reuses :func:`retrylens.simulation.run_fleet` unchanged: a candidate runs as the
scenario's policy, with the scenario's shadow section emptied.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from retrylens.schemas import RetryEvent
from retrylens.sdk.core.policy import RetryPolicy
from retrylens.simulation import Scenario, fleet_policy, run_fleet
from retrylens.simulation.scenario import Shadow

from .history import History, build_history, frame_from_events, observed_metrics

START = datetime(2024, 3, 1, tzinfo=UTC)


def scenario_for(scenario: Scenario, policy: RetryPolicy) -> Scenario:
    """``scenario`` whose governor runs ``policy`` as is (no shadow candidate, no exploration)."""
    data: dict[str, Any] = policy.model_dump(mode="json")
    data.pop("shadow", None)
    return scenario.model_copy(update={"policy": data, "shadow": Shadow()})


def run_policy_events(scenario: Scenario, *, tasks: int, seed: int) -> list[RetryEvent]:
    events: list[RetryEvent] = []
    run_fleet(scenario, tasks=tasks, seed=seed, driver="governor", emit=events.append, start=START,
              validate_events=False)
    return events


def history_of(events: list[RetryEvent]) -> History:
    return build_history(frame_from_events(events))


@dataclass
class GroundTruth:
    seed: int
    live: RetryPolicy
    log: History                                  # the live run (with exploration): what estimators read
    truth: dict[str, dict[str, np.ndarray]]       # policy name → per-task true metrics, same task order
    histories: dict[str, History]

    def true_means(self, name: str) -> dict[str, float]:
        return {m: float(v.mean()) for m, v in self.truth[name].items()}


def run_ground_truth(scenario: Scenario, candidates: dict[str, RetryPolicy], *, tasks: int,
                     seed: int, include_greedy: bool = False) -> GroundTruth:
    """The live log plus each candidate's true run on the same seeded fleet.

    ``include_greedy`` also runs the live policy without exploration (``"live-greedy"``),
    the target of the off-policy estimators' own check.
    """
    live = fleet_policy(scenario)
    log = history_of(run_policy_events(scenario, tasks=tasks, seed=seed))
    truth = {"live": observed_metrics(log)}
    histories = {"live": log}
    runs = dict(candidates)
    if include_greedy:
        runs["live-greedy"] = live
    for name, policy in runs.items():
        h = history_of(run_policy_events(scenario_for(scenario, policy), tasks=tasks, seed=seed))
        order = {t: i for i, t in enumerate(h.task_ids)}
        index = np.array([order[t] for t in log.task_ids])
        truth[name] = {m: v[index] for m, v in observed_metrics(h).items()}
        histories[name] = h
    return GroundTruth(seed=seed, live=live, log=log, truth=truth, histories=histories)
