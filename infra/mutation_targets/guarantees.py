"""Mutation targets of the modules issue 38 named: the spool and the emitter, OTLP decoding,
advice effects, the pre-check log and monitor, and replay's limits and history.

Each lists the narrowest fast tests that pin its guarantee (the full-disk ones mount a real
tmpfs: they need root, as the project's machine and CI have).
"""

from __future__ import annotations

from .target import Equivalent, Target

_EMITTER = "tests/foundation/test_emitter.py"

TARGETS: dict[str, Target] = {
    "spool": Target(
        "sdk/transport/spool.py",
        ("_open_tail", "append", "_roll_back", "_rotate", "read", "commit", "committed", "_write_all",
         "_valid_length"),
        ("tests/foundation/test_spool.py", "tests/foundation/test_spool_full_disk.py"),
    ),
    "emitter": Target(
        "sdk/transport/emitter.py",
        ("_overflow", "_route", "_to_spool", "_deliver", "_drain_spool"),
        (
            _EMITTER,
            "--deselect", f"{_EMITTER}::test_embedded_mode_spools_then_the_ingestor_stores_each_event_once",
            "--deselect", f"{_EMITTER}::test_kafka_fallback_spools_are_left_to_their_own_emitter",
            "tests/foundation/test_emitter_full_disk.py",
        ),
    ),
    "advice_effects": Target(
        "analytics/advice_effects.py",
        ("_diff", "_wilson", "_diff_rates", "verdict", "measure"),
        ("tests/analytics/test_advice_effect_cost.py", "tests/analytics/test_advice_effect_intervals.py"),
    ),
    "otlp_decode": Target(
        "api/otlp_decode.py",
        ("decode", "_from_protobuf", "_from_json", "_json_span", "_hex_id", "_pb_id", "_uint", "_exception"),
        (
            "tests/api/test_otlp_delivery_guarantees.py",
            "tests/api/test_otlp_status_codes.py",
            "tests/api/test_otlp.py::test_otlp_json_a_failed_last_attempt_is_an_inferred_give_up",
            "tests/api/test_otlp.py::test_bad_otlp_input_gets_a_clear_4xx",
        ),
    ),
    "precheck_log": Target(
        "api/precheck_log.py",
        ("add", "flush", "close"),
        ("tests/api/test_api_precheck_log.py",),
    ),
    "precheck_monitor": Target(
        "analytics/prechecks.py",
        ("auc", "judge", "precheck_measures"),
        ("tests/api/test_api_precheck_monitor.py",),
    ),
    "replay_limits": Target(
        "evaluation/limits.py",
        ("attempt_limit",),
        ("tests/evaluation/test_replay_planted_budgets.py", "tests/evaluation/test_eval_budget_steps.py"),
    ),
    "replay_history": Target(
        "evaluation/history.py",
        ("build_history",),
        ("tests/evaluation/test_replay_planted_budgets.py", "tests/evaluation/test_eval_budget_steps.py",
         "tests/evaluation/test_eval_replay.py"),
    ),
}

EQUIVALENT: Equivalent = {}
