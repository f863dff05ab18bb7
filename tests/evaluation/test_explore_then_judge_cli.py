"""Explore, then judge, end to end through ``retrylens demo`` and ``retrylens report policies``.

The live policy runs the planted scenario with the unsupported change as its shadow
candidate, explored at ``shadow.explore_stops`` 0.5; ``report policies`` then judges the
change from the store the demo filled. The truth: the change run live in the simulator on
the same seed and start. Raising the cap of logic errors (which never recover) must read
"no gain" and not be adopted; retrying 429s where the live policy gave up must be adopted,
with the true gain inside the report's interval. Slow: two demos and two reports (about
9 s of CPU each, a minute of wall time on a loaded machine).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from retrylens.evaluation.planted import SETUPS
from retrylens.evaluation.planted_cli import explore_then_judge

pytestmark = [pytest.mark.slow, pytest.mark.clickhouse]

SEED = 3
TASKS = 250


def test_explored_logic_retries_are_judged_no_gain_and_not_adopted(tmp_path: Path) -> None:
    run = explore_then_judge(SETUPS["claims-explores-logic"], seed=SEED, tasks=TASKS, workdir=tmp_path)
    assert run["explored_decisions"] > 0  # the demo recorded the exploration
    assert run["truth"] == 0.0
    assert run["unsupported_share"] == 0.0, run
    assert run["estimate"] == 0.0 and run["truth_in_ci"], run
    assert run["verdict"] not in ("better", "cheaper", "below_margin", "not_supported"), run
    assert run["decision"] != "adopt_candidate"


def test_explored_429_retries_are_adopted_with_the_truth_in_the_interval(tmp_path: Path) -> None:
    run = explore_then_judge(SETUPS["claims-explores-429"], seed=SEED, tasks=TASKS, workdir=tmp_path)
    assert run["explored_decisions"] > 0
    assert run["truth"] > 0.03
    assert run["verdict"] == "better", run
    assert run["decision"] == "adopt_candidate"
    assert run["truth_in_ci"], run
