"""Multi-step tasks whose tools take no key and fail after the effect: the plain governor
wiring (call + decorated tools) duplicates nothing; a naive per-call loop does."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from retrylens.cli.main import app
from retrylens.simulation.multistep import Faults, run_multistep


def test_the_plain_wiring_never_duplicates_a_side_effect_the_naive_loop_does() -> None:
    naive = run_multistep("naive", tasks=150, seed=3)
    plain = run_multistep("plain", tasks=150, seed=3)
    assert naive.duplicate_side_effects > 0  # the faults do land after the effect
    assert plain.duplicate_side_effects == 0
    assert plain.handed_off > 0  # the ambiguous writes went to a person
    assert plain.succeeded + plain.handed_off + plain.failed == 150


def test_verify_finishes_the_tasks_the_plain_wiring_hands_off() -> None:
    plain = run_multistep("plain", tasks=150, seed=3)
    verified = run_multistep("verified", tasks=150, seed=3)
    assert verified.duplicate_side_effects == 0
    assert verified.succeeded > plain.succeeded
    assert verified.handed_off == 0


def test_without_after_effect_faults_nothing_is_handed_off() -> None:
    calm = Faults(write_after=0.0)
    assert run_multistep("plain", tasks=60, seed=1, faults=calm).handed_off == 0


def test_an_unknown_wiring_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown wiring"):
        run_multistep("tenacity", tasks=1)


def test_simulate_prints_the_multistep_comparison() -> None:
    result = CliRunner().invoke(
        app, ["simulate", "--tasks", "20", "--seed", "5", "--multistep-tasks", "80", "--json"]
    )
    assert result.exit_code == 0, result.output
    multistep = json.loads(result.output)["multistep"]
    assert multistep["plain"]["duplicate_side_effects"] == 0
    assert multistep["naive"]["duplicate_side_effects"] > 0
    assert multistep["plain"]["tasks"] == 80
