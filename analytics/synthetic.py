"""A small, documented generative model of agent tasks, for tests, demos and the classifier.

It stands in for the simulated fleet where that is not available, and it is honest about
what it plants, so tests can check that analytics find it:

- three agents with their own phase and base failure log-odds: planner/planning −1.2,
  coder/execution −0.8, researcher/research −1.5;
- an input is 3–7 topic words from :data:`TOPICS` in a sentence template; 15 % carry a long
  appendix (300–1500 extra characters); 25 % of tasks reuse an earlier input verbatim;
- failure log-odds rise by +2.0 when an input mentions both ``invoice`` and ``refund``,
  +1.2 for ``legacy``, +0.8 for a long input, +1.0 when it names the ``browser`` tool,
  −0.8 for ``summary``, and +1.5 for a latent "bad" input (10 % of distinct inputs, which
  therefore keep failing when reused); P(fail) = sigmoid(log-odds);
- a failing task fails 2–3 attempts (planning: ``logic``, execution: ``tool_error``,
  research: ``timeout``) and is handed off (half the time) or given up; a succeeding task
  fails its first attempt transiently (timeout or rate limit) 30 % of the time and then
  succeeds on the retry;
- tasks start one minute apart, ending an hour before ``now``.
"""

from __future__ import annotations

import math
import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from retrylens.schemas import RetryEvent
from retrylens.sdk.text.features import extract_input_features, input_fingerprint

TOPICS = (
    "invoice refund customer order shipment legacy database report summary export schedule "
    "meeting calendar contract payment account migration dashboard browser search email "
    "inventory pricing forecast audit compliance ticket deployment backup archive"
).split()
TOOLS = ("browser", "sql", "email", "calendar")
AGENTS = {"planner": ("planning", -1.2), "coder": ("execution", -0.8), "researcher": ("research", -1.5)}
FAILURE_TYPE = {"planning": "logic", "execution": "tool_error", "research": "timeout"}


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def failure_logit(text: str, agent: str, bad: bool) -> float:
    words = set(text.lower().replace(".", " ").split())
    logit = AGENTS[agent][1]
    logit += 2.0 if {"invoice", "refund"} <= words else 0.0
    logit += 1.2 if "legacy" in words else 0.0
    logit += 0.8 if len(text) > 300 else 0.0
    logit += 1.0 if "browser" in words else 0.0
    logit -= 0.8 if "summary" in words else 0.0
    return logit + (1.5 if bad else 0.0)


def _input(rng: random.Random) -> str:
    words = rng.sample(TOPICS, rng.randint(3, 7))
    text = f"Please handle the {' '.join(words[:2])} work: check {', '.join(words[2:])} and report back."
    if rng.random() < 0.15:
        text += "\n" + " ".join(rng.choice(TOPICS) for _ in range(rng.randint(40, 200)))
    return text


def synthetic_events(tasks: int, *, seed: int = 0, project: str = "synthetic", now: datetime | None = None) -> list[RetryEvent]:
    rng = random.Random(seed)
    now = now or datetime.now(UTC)
    start = now - timedelta(hours=1, minutes=tasks)
    inputs: list[tuple[str, bool]] = []
    events: list[RetryEvent] = []
    for i in range(tasks):
        if inputs and rng.random() < 0.25:
            text, bad = rng.choice(inputs)
        else:
            text, bad = _input(rng), rng.random() < 0.10
            inputs.append((text, bad))
        agent = rng.choice(sorted(AGENTS))
        fails = rng.random() < _sigmoid(failure_logit(text, agent, bad))
        events.extend(_task_events(rng, project, f"t{seed}-{i:06d}", agent, text, fails, start + timedelta(minutes=i)))
    return events


def _task_events(rng: random.Random, project: str, task_id: str, agent: str, text: str, fails: bool,
                 ts: datetime) -> list[RetryEvent]:
    phase = AGENTS[agent][0]
    common: dict[str, Any] = {
        "project": project, "agent": {"name": agent}, "task_id": task_id, "phase": phase,
        "input_fingerprint": input_fingerprint(text), "policy_version": "v1",
    }
    out: list[RetryEvent] = []

    def emit(kind: str, attempt: int, **fields: Any) -> None:
        nonlocal ts
        ts += timedelta(milliseconds=rng.randint(50, 2000))
        out.append(RetryEvent(event_id=uuid.UUID(int=rng.getrandbits(128)), ts=ts, kind=kind, attempt=attempt,
                              correlation_id=f"{task_id}-{attempt}", **common, **fields))

    emit("task_started", 0, input_features=extract_input_features(text, agent=agent, tools=TOOLS))
    if fails:
        n_failures = rng.randint(2, 3)
        plan = [(FAILURE_TYPE[phase], False)] * n_failures
    else:
        plan = [(rng.choice(["timeout", "rate_limit"]), False)] if rng.random() < 0.3 else []
        plan.append(("", True))
    for number, (error, ok) in enumerate(plan, start=1):
        cost = {"latency_ms": rng.randint(200, 3000), "cost_usd": round(rng.uniform(0.001, 0.02), 4),
                "tokens_in": rng.randint(100, 2000), "tokens_out": rng.randint(20, 500)}
        emit("attempt_started", number)
        if ok:
            emit("attempt_succeeded", number, **cost)
        else:
            emit("attempt_failed", number, error_type=error, error_detail={"message": f"{error} in {phase} step {number}"}, **cost)
            last = number == len(plan)
            decision = ("handoff_human" if rng.random() < 0.5 else "give_up") if last else "retry_backoff"
            emit("decision", number, decision=decision, backoff_ms=0 if last else 500 * number)
    outcome = "succeeded" if plan[-1][1] else ("handed_off" if out[-1].decision == "handoff_human" else "failed")
    emit("task_finished", len(plan), outcome=outcome)
    return out
