"""Seeded task inputs: templates filled with values, sized, some of them recurring.

Inputs come from the scenario's templates; their keywords, sizes and tools really change
the fault rates (see :mod:`world`), so a classifier trained on ``input_features`` has
something to learn. A template's ``recurring_share`` of tasks reuse an earlier input
verbatim (same fingerprint), as 78 % of the real traces share their task with another run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .scenario import Scenario, Template

RISK_FIELDS = ("schema_mismatch", "validation", "planning_failure")
_CELLS = [str(n) for n in range(100, 100_000, 7)]


@dataclass(frozen=True)
class SimTask:
    index: int
    task_id: str
    template: Template
    text: str
    size_tokens: int
    start_s: float
    risk: dict[str, float]
    logic: bool


def _attachment(rng: random.Random, tokens: int) -> str:
    """Table-like numeric filler of about ``tokens`` tokens (numbers add no keywords)."""
    if tokens <= 0:
        return ""
    cells = rng.choices(_CELLS, k=max(1, tokens * 4 // 6))
    return "\n" + "\n".join(" ".join(cells[i:i + 12]) for i in range(0, len(cells), 12))


def _risk(template: Template, text: str) -> dict[str, float]:
    lowered = text.casefold()
    risk = {name: getattr(template, name) for name in RISK_FIELDS}
    for keyword, multipliers in template.keyword_risk.items():
        if keyword.casefold() in lowered:
            for name, factor in multipliers.items():
                if name in risk:
                    risk[name] = min(0.95, risk[name] * factor)
    return risk


def generate_tasks(scenario: Scenario, n: int, seed: int) -> list[SimTask]:
    """``n`` tasks spread over the scenario's span, identical for the same seed."""
    rng = random.Random(f"{seed}:tasks")
    weights = [t.weight for t in scenario.templates]
    pools: dict[str, list[tuple[str, int]]] = {t.name: [] for t in scenario.templates}
    span_s = scenario.span_hours * 3600
    tasks: list[SimTask] = []
    for i in range(n):
        template = rng.choices(scenario.templates, weights)[0]
        pool = pools[template.name]
        if pool and rng.random() < template.recurring_share:
            head, size = rng.choice(pool)
        else:
            values = {key: rng.choice(options) for key, options in template.values.items()}
            head = " ".join(template.text.format(**values).split())
            lo, hi = template.size_tokens
            size = int(lo * (hi / lo) ** rng.random()) if hi > lo else lo
            pool.append((head, size))
        body_tokens = max(0, size - len(head) // 4)
        text = head + _attachment(random.Random(f"{seed}:{head}:{size}"), body_tokens)
        start = span_s * (i + rng.random() * 0.5) / max(1, n)
        tasks.append(SimTask(
            index=i, task_id=f"sim-{seed}-{i:06d}", template=template, text=text, size_tokens=size, start_s=start,
            risk=_risk(template, head), logic=any(marker in head for marker in template.logic_markers),
        ))
    return tasks
