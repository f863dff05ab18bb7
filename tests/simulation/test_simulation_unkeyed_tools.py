"""Multi-step tasks whose tools take no key and fail after the effect: the plain governor
wiring (call + decorated tools) duplicates nothing; a naive per-call loop does."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from retrylens.cli.main import app
from retrylens.simulation.unkeyed_tools import Faults, run_unkeyed


def test_the_plain_wiring_never_duplicates_a_side_effect_the_naive_loop_does() -> None:
    naive = run_unkeyed("naive", tasks=150, seed=3)
    plain = run_unkeyed("plain", tasks=150, seed=3)
    assert naive.duplicate_side_effects > 0  # the faults do land after the effect
    assert plain.duplicate_side_effects == 0
    assert plain.handed_off > 0  # the ambiguous writes went to a person
    assert plain.succeeded + plain.handed_off + plain.failed == 150


def test_verify_finishes_the_tasks_the_plain_wiring_hands_off() -> None:
    plain = run_unkeyed("plain", tasks=150, seed=3)
    verified = run_unkeyed("verified", tasks=150, seed=3)
    assert verified.duplicate_side_effects == 0
    assert verified.succeeded > plain.succeeded
    assert verified.handed_off == 0


def test_without_after_effect_faults_nothing_is_handed_off() -> None:
    calm = Faults(write_after=0.0)
    assert run_unkeyed("plain", tasks=60, seed=1, faults=calm).handed_off == 0


def test_an_unknown_wiring_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown wiring"):
        run_unkeyed("tenacity", tasks=1)


def test_simulate_prints_the_unkeyed_tools_comparison() -> None:
    result = CliRunner().invoke(
        app, ["simulate", "--tasks", "20", "--seed", "5", "--unkeyed-tasks", "80", "--json"]
    )
    assert result.exit_code == 0, result.output
    unkeyed = json.loads(result.output)["unkeyed_tools"]
    assert unkeyed["plain"]["duplicate_side_effects"] == 0
    assert unkeyed["naive"]["duplicate_side_effects"] > 0
    assert unkeyed["plain"]["tasks"] == 80
