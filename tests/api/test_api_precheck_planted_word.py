"""Through the whole product: a risky word in a long prompt is stored, learnt and named by the pre-check.

The agent's SDK features go on the events, the store trains the model from the events alone,
and ``POST /v1/precheck`` names the planted word (``wire``, one of 15–19 content words) as
the first reason of a risky input and not at all for a safe one (tests/planted_words.py).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from apitest_support import ACME, NOW, insert
from planted_words import PLANTED, planted_tasks

from retrylens.analytics.model_store import ModelStore, models_dir
from retrylens.analytics.training import train_from_store
from retrylens.schemas import RetryEvent
from retrylens.sdk.text.features import extract_input_features, input_fingerprint

pytestmark = pytest.mark.clickhouse
AGENT = "long-agent"


def _events(tasks) -> list[RetryEvent]:
    events = []
    for number, task in enumerate(tasks):
        common = {"project": "acme", "agent": {"name": task.agent}, "task_id": f"planted-{number}",
                  "input_fingerprint": input_fingerprint(task.text)}
        at = NOW - timedelta(hours=30) + timedelta(minutes=number)
        events += [RetryEvent(correlation_id=f"planted-{number}-0", kind="task_started", ts=at,
                              input_features=extract_input_features(task.text, agent=task.agent), **common),
                   RetryEvent(correlation_id=f"planted-{number}-1", attempt=1, kind="task_finished",
                              ts=at + timedelta(seconds=5), outcome="failed" if task.failed else "succeeded", **common)]
    return events


def test_the_precheck_names_the_risky_word_of_a_long_prompt_first_and_never_for_a_safe_one(
        client, api_settings, seeded) -> None:
    tasks = [t for t in planted_tasks(700, seed=8) if t.agent == AGENT]
    insert(seeded, _events(tasks[:600]))
    result = train_from_store(seeded, model_store=ModelStore(models_dir(api_settings)))
    assert result.meta["promotion"]["promoted"]
    for task in tasks[600:640]:
        body = {"project": "acme", "agent": AGENT, "task_input": task.text}
        answer = client.post("/v1/precheck", json=body, headers=ACME).json()
        words = [r["words"] for r in answer["reasons"]]
        if task.risky:
            assert words and words[0].startswith(f"the word '{PLANTED[AGENT]}'"), (task.text, words)
        else:
            assert not any(f"'{PLANTED[AGENT]}" in w for w in words), (task.text, words)
