"""The governor emits the same events as when they were recorded, whatever path built them.

Why: the retry path is tuned for speed (issue 12) — events built from precomputed parts,
the run opened from what the fast path computed, cheaper ids — and none of that may change
what an agent records. ``tests/fixtures/governor_events/events.json`` holds the events of
a set of scenarios (retries, give-ups, hand-offs, shadow decisions, side effects, steps,
fallbacks, the explicit run API, acall, secrets and names to redact) recorded before the
tuning; each is replayed here with and without validation, with the seeded id source
(exact) and with the production one (ids compared by order of first appearance).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "governor_events"
_spec = importlib.util.spec_from_file_location("governor_events_capture", FIXTURES / "capture.py")
assert _spec is not None and _spec.loader is not None
capture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(capture)

RECORDED: dict[str, dict[str, list[dict[str, Any]]]] = json.loads(
    (FIXTURES / "events.json").read_text()
)


def _first_difference(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> str:
    for i, (a, b) in enumerate(zip(got, want, strict=False)):
        if a != b:
            fields = {k: (a.get(k), b.get(k)) for k in {*a, *b} if a.get(k) != b.get(k)}
            return f"event {i} ({b.get('kind')}) differs: {fields}"
    return f"{len(got)} events, {len(want)} recorded"


def test_every_scenario_is_recorded() -> None:
    assert set(RECORDED["seeded"]) == set(capture.SCENARIOS) == set(RECORDED["system_ids"])
    kinds = {e["kind"] for events in RECORDED["seeded"].values() for e in events}
    assert {"task_started", "attempt_failed", "decision", "handoff", "side_effect"} <= kinds


@pytest.mark.parametrize("validate", [False, True], ids=["fast", "validated"])
@pytest.mark.parametrize("name", sorted(capture.SCENARIOS))
def test_seeded_events_equal_the_recorded_ones(name: str, validate: bool) -> None:
    got = capture.run_scenario(name, validate=validate)
    want = RECORDED["seeded"][name]
    assert got == want, _first_difference(got, want)


@pytest.mark.parametrize("name", sorted(capture.SCENARIOS))
def test_events_with_system_ids_equal_the_recorded_ones_modulo_ids(name: str) -> None:
    got = capture.run_scenario(name, system_ids=True)
    want = RECORDED["system_ids"][name]
    assert got == want, _first_difference(got, want)


def test_no_secret_or_name_is_recorded() -> None:
    text = json.dumps(RECORDED)
    for secret in (
        "sk-abcdefghijklmnopqrstuv",
        "Mei Chen",
        "Ana Silva",
        "ana@example.com",
        "hunter2xyz",
        "abc123secret",
    ):
        assert secret not in text
