"""A planted-truth fleet for the risk model: one word makes a task fail, in a short or a long prompt.

Two agents: ``short-agent`` gets 3–5 content words, ``long-agent`` 15–19 (and some lines
and numbers, so sizes vary); a word of each (``offshore``, ``wire``) is planted in
:data:`PLANTED_SHARE` of the tasks and makes them fail with :data:`RISKY_FAILURE` against
:data:`BASE_FAILURE` for the others. Filler words and sizes have no effect. The truth is
known in advance, so tests can hold the model, its reasons and its advice to it. The
planted word takes a filler word's place, so an input's size is no sign of its risk.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

FILLER = tuple(
    """account address balance basket booking branch budget card cart catalogue change charge
    checkout claim client contract coupon credit customer delivery deposit discount dispatch
    document estimate export fee form freight guarantee import insurance inventory invoice item
    journal ledger licence limit loan margin member merchant notice order package parcel partner
    payment payroll pension permit plan policy premium price product profile purchase quote
    receipt refund region rental report request reserve return review salary schedule service
    shipment statement status stock subscription supplier tariff tax ticket transaction
    upgrade vendor warranty""".split()
)
PLANTED = {"short-agent": "offshore", "long-agent": "wire"}
WORDS = {"short-agent": (3, 5), "long-agent": (15, 19)}
PLANTED_SHARE = 0.35
RISKY_FAILURE = 0.8
BASE_FAILURE = 0.12


@dataclass(frozen=True)
class PlantedTask:
    agent: str
    text: str
    risky: bool
    failed: bool


def planted_tasks(n_per_agent: int, *, seed: int = 0, planted: dict[str, str] | None = None) -> list[PlantedTask]:
    """``n_per_agent`` tasks of each agent, interleaved; the planted word at a random position."""
    rng = random.Random(seed)
    planted = planted or PLANTED
    tasks = []
    for _ in range(n_per_agent):
        for agent, (low, high) in WORDS.items():
            words = rng.sample(FILLER, rng.randint(low, high))
            risky = rng.random() < PLANTED_SHARE
            if risky:  # in place of a filler word: the input's size says nothing of its risk
                words[rng.randrange(len(words))] = planted[agent]
            lines = [" ".join(words[i:i + 6]) for i in range(0, len(words), 6)]
            if agent == "long-agent" and rng.random() < 0.5:
                lines.append(f"ref {rng.randint(10, 99)} qty {rng.randint(1, 9)}")
            text = "\n".join(lines)
            failed = rng.random() < (RISKY_FAILURE if risky else BASE_FAILURE)
            tasks.append(PlantedTask(agent, text, risky, failed))
    return tasks
