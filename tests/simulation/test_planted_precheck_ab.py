"""The demo's with/without pre-check A/B on a planted word in a long prompt (issue 34, item 6).

``simulation/planted/long_prompt_word.yaml`` plants ``wire`` in a 17-content-word prompt (and
``offshore`` in a short one); those tasks fail ~85 % of the time, the others ~5-12 %. The first
half is recorded and trained on, the second half pre-checked through the real API app, then run
again without pre-checks on the same seeded faults (bench/planted_precheck_ab.py). What the advice
does there is measured by that script, not asserted here: on this scenario the only kind given is
the agent-wide ``no_retry_of`` cap, to risky and other tasks alike (bench/RESULTS.md, ``model``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from retrylens.cli import demo_loop
from retrylens.cli.road import LocalRoad
from retrylens.simulation import load_scenario, run_fleet
from retrylens.simulation.tasks import generate_tasks
from retrylens.store.event_table import event_row

SCENARIO = Path(__file__).resolve().parents[2] / "simulation" / "planted" / "long_prompt_word.yaml"
START = datetime(2026, 11, 1, tzinfo=UTC)
TASKS, SEED = 400, 7


def test_in_the_ab_the_precheck_scores_long_prompts_with_the_planted_word_above_the_others(
    settings, store
) -> None:
    scenario = load_scenario(SCENARIO)
    first, rest = range(0, TASKS // 2), range(TASKS // 2, TASKS)
    events: list = []
    run_fleet(scenario, tasks=TASKS, seed=SEED, emit=events.append, task_range=first, start=START)
    store.insert_rows([event_row(e, topic="t", partition=0, offset=i) for i, e in enumerate(events)])
    road = LocalRoad(settings, store)
    demo_loop.train(road)
    log = demo_loop.PrecheckLog()
    risks: dict[str, float] = {}
    record = log.record

    def keep(answer, task_id: str = "") -> None:
        risks[task_id] = answer.risk
        record(answer, task_id)

    log.record = keep  # type: ignore[method-assign]
    with demo_loop.api_preflights(settings, road, log) as preflight:
        demo_loop.run_part(scenario, tasks=TASKS, seed=SEED, part=rest, start=START, preflight=preflight)

    truth = {t.task_id: "wire" in t.text.split("\n")[0] for t in generate_tasks(scenario, TASKS, SEED)
             if t.template.agent == "long-agent"}
    risky = [risks[t] for t, planted in truth.items() if planted and t in risks]
    other = [risks[t] for t, planted in truth.items() if not planted and t in risks]
    assert len(risky) >= 20 and len(other) >= 20
    assert min(risky) > max(0.5, sorted(other)[int(0.9 * len(other))])
    assert sum(other) / len(other) < 0.3
