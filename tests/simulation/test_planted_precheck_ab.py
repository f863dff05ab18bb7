"""The demo's with/without pre-check A/B on a planted word late in a long prompt (issue 34, item 6).

``simulation/planted/long_prompt_word.yaml`` plants ``wire`` as the 20th of 22 words of a long
prompt (and ``offshore`` in a short one); those tasks fail ~85 % of the time, the others ~5-12 %.
The first half (500 tasks) is recorded and trained on, the second half pre-checked through the real API app,
as the A/B of bench/planted_precheck_ab.py does (which then runs it again without pre-checks on
the same seeded faults and measures what the advice did, per seed, in bench/RESULTS.md). Here:
the word is found (the planted long prompts score above the others), named (the first reason of
every risky long prompt) and advised on (risky tasks get advice, the others almost never: the
advice book reads each agent's high-risk tasks apart from the rest, :mod:`analytics.advice_segments`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from retrylens.api.precheck import advice_kinds
from retrylens.cli import demo_loop
from retrylens.cli.road import LocalRoad
from retrylens.simulation import load_scenario, run_fleet
from retrylens.simulation.tasks import generate_tasks
from retrylens.store.event_table import event_row

SCENARIO = Path(__file__).resolve().parents[2] / "simulation" / "planted" / "long_prompt_word.yaml"
START = datetime(2026, 11, 1, tzinfo=UTC)
#: the bench's size: with 250 tasks of an agent learned, its history holds too few simplified retries
#: of its risky tasks to judge simplified mode (400 or 800 tasks in all, seed 7), so no advice is given
TASKS, SEED = 1000, 7


@pytest.mark.slow
@pytest.mark.timeout(1200)

def test_in_the_ab_the_planted_word_late_in_a_long_prompt_is_found_named_first_and_advised_on(
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
    answers: dict[str, Any] = {}
    record = log.record

    def keep(answer, task_id: str = "") -> None:
        answers[task_id] = answer
        record(answer, task_id)

    log.record = keep  # type: ignore[method-assign]
    with demo_loop.api_preflights(settings, road, log) as preflight:
        demo_loop.run_part(scenario, tasks=TASKS, seed=SEED, part=rest, start=START, preflight=preflight)

    long_tasks = [t for t in generate_tasks(scenario, TASKS, SEED) if t.template.agent == "long-agent"]
    words = long_tasks[0].text.split("\n")[0].replace(",", " ").replace(".", " ").split()
    assert 20 <= len(words) <= 25 and words.index(next(w for w in words if w in {"wire", "voucher", "wallet", "card",
                                                                            "cheque"})) >= 18
    truth = {t.task_id: "wire" in t.text.split("\n")[0] for t in long_tasks}
    risky = [answers[t] for t, planted in truth.items() if planted and t in answers]
    other = [answers[t] for t, planted in truth.items() if not planted and t in answers]
    assert len(risky) >= 20 and len(other) >= 20
    # found: every planted long prompt scores above the others
    other_risks = sorted(a.risk for a in other)
    assert min(a.risk for a in risky) > max(0.5, other_risks[int(0.9 * len(other_risks))])
    assert sum(other_risks) / len(other_risks) < 0.3
    # named: the planted word is the first reason of every risky long prompt, and no reason of the others
    assert all("wire" in a.reasons[0]["words"] for a in risky)
    assert not any("wire" in r["words"] for a in other for r in a.reasons)
    # advised on: (almost) every risky task gets advice (or has it withheld, the A/B's control share),
    # (almost) no other task does
    def advised(answer: Any) -> bool:
        return bool(advice_kinds(answer)) or any(e.get("status") == "withheld" for e in answer.advice)

    advised_risky = sum(map(advised, risky)) / len(risky)
    advised_other = sum(map(advised, other)) / len(other)
    assert advised_risky >= 0.8 and advised_other <= 0.05, (advised_risky, advised_other)
