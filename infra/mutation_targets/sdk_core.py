"""Mutation targets: the SDK decision loop and what it decides with: backoff, budgets, side effects (issues 20, 24, 25)."""

from __future__ import annotations

from .target import Equivalent, Target

TARGETS: dict[str, Target] = {
    "backoff": Target(
        "sdk/backoff.py",
        ("__call__", "factor", "wait_from_policy", "default_wait"),
        ("tests/sdk/test_sdk_backoff.py", "tests/sdk/test_rules_params.py"),
    ),
    "budget": Target(
        "sdk/budget.py",
        (
            "charge",
            "complete_step",
            "retries",
            "exhausted",
            "stopping_budget",
            "record",
            "allows_retry",
        ),
        (
            "tests/sdk/test_budget_guarantees.py",
            "tests/sdk/test_budget_steps.py",
            "tests/sdk/test_sdk_promises.py",
        ),
    ),
    "allowance": Target(
        "sdk/policy.py",
        ("_fixed_attempts", "_ceiling_above_base", "allowance", "most_attempts", "steps_allowance"),
        ("tests/sdk/test_budget_steps.py", "tests/sdk/test_budget_guarantees.py"),
    ),
    "effects": Target(
        "sdk/effects.py",
        ("has_contract", "effect", "_verify", "_committed", "pay_debts", "_name", "accepts"),
        (
            "tests/sdk/test_effects_guarantees.py",
            "tests/sdk/test_sdk_safe_defaults.py",
            "tests/sdk/test_sdk_promises.py",
            "tests/sdk/test_sdk_loop.py",
            "tests/sdk/test_sdk_loop_defects.py",
            "tests/sdk/test_sdk_crash_resume.py",
        ),
    ),
    # -- the decision loop (issue 20 item 1; mutation-tested before issue 20 is resolved) --
    "loop": Target(
        "sdk/loop.py",
        ("task", "step"),
        (
            "--noconftest",
            "tests/sdk/test_loop_guarantees.py",
            "tests/sdk/test_sdk_loop.py",
            "tests/sdk/test_sdk_loop_defects.py",
            "--deselect=tests/sdk/test_sdk_loop_defects.py::test_a_channel_that_hangs_is_bounded_in_a_plain_call",
            "--deselect=tests/sdk/test_sdk_loop_defects.py::test_an_async_channel_that_hangs_is_bounded",
            "tests/sdk/test_sdk_safe_defaults.py",
            "tests/sdk/test_budget_steps.py",
        ),
    ),
    "stopping": Target(
        "sdk/stopping.py",
        ("stop", "hand_off", "build_package", "_error"),
        (
            "--noconftest",
            "tests/sdk/test_loop_guarantees.py",
            "tests/sdk/test_sdk_loop.py",
            "tests/sdk/test_sdk_loop_defects.py",
            "--deselect=tests/sdk/test_sdk_loop_defects.py::test_a_channel_that_hangs_is_bounded_in_a_plain_call",
            "--deselect=tests/sdk/test_sdk_loop_defects.py::test_an_async_channel_that_hangs_is_bounded",
            "tests/sdk/test_sdk_promises.py",
        ),
    ),
    "steps": Target(
        "sdk/steps.py",
        ("_step", "step_succeeded", "complete_step", "step_done", "call_name", "_split"),
        (
            "--noconftest",
            "tests/sdk/test_loop_guarantees.py",
            "tests/sdk/test_sdk_loop.py",
            "tests/sdk/test_budget_steps.py",
            "tests/sdk/test_sdk_safe_defaults.py",
            "tests/sdk/test_effects_guarantees.py",
        ),
    ),
    "rules": Target(
        "sdk/rules.py",
        ("__call__", "stop_verdict", "cap"),
        (
            "--noconftest",
            "tests/sdk/test_rules_guarantees.py",
            "tests/sdk/test_rules_params.py",
            "tests/sdk/test_sdk_governor.py",
            "tests/sdk/test_budget_guarantees.py",
        ),
    ),
    "verdicts": Target(
        "sdk/rules.py",
        ("apply_verdict", "record_failure", "retrying", "answers_for", "compile_policy"),
        (
            "--noconftest",
            "tests/sdk/test_rules_guarantees.py",
            "tests/sdk/test_rules_params.py",
            "tests/sdk/test_sdk_governor.py",
            "tests/sdk/test_budget_guarantees.py",
        ),
    ),
    "drivers": Target(
        "sdk/drivers.py",
        ("drive", "adrive", "call", "acall", "_hook", "_ahook", "_blocking"),
        (
            "--noconftest",
            "tests/sdk/test_loop_guarantees.py",
            "tests/sdk/test_sdk_loop.py",
            "tests/sdk/test_sdk_loop_defects.py",
            "--deselect=tests/sdk/test_sdk_loop_defects.py::test_a_channel_that_hangs_is_bounded_in_a_plain_call",
            "--deselect=tests/sdk/test_sdk_loop_defects.py::test_an_async_channel_that_hangs_is_bounded",
            "tests/sdk/test_sdk_safe_defaults.py",
        ),
    ),
}

EQUIVALENT: Equivalent = {
    (
        "sdk/backoff.py",
        "factor",
        "core/ReplaceBinaryOperator_Add_Sub",
        "return 1.0 - self.share * (2.0 * rng.random() - 1.0) if self.share else 1.0",
    ): "2r-1 is uniform on [-1, 1], symmetric about 0: 1-share*(2r-1) has the same distribution as 1+share*(2r-1); only one seeded draw differs, not the policy",
    (
        "sdk/budget.py",
        "exhausted",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def exhausted(self, budget: TaskBudget, now: float) -> str & None:",
    ): "a return annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/budget.py",
        "stopping_budget",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def stopping_budget(reason: str) -> str & None:",
    ): "a return annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceComparisonOperator_Is_Eq",
        "ambiguous = isinstance(exc, Exception) and classify(exc).error_type == ErrorType.TIMEOUT",
    ): "an enum member equals only itself: == and is agree on ErrorType",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceComparisonOperator_Is_Eq",
        "if record.status == SideEffectStatus.COMMITTED:",
    ): "an enum member equals only itself: == and is agree on SideEffectStatus",
    (
        "sdk/effects.py",
        "_verify",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "error: BaseException & None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "rollback: Callable[..., object] & None = None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "key: str & None = None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "verify: Callable[..., object] & None = None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "step: str & None = None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceBinaryOperator_Mul_Div",
        "/,",
    ): "the keyword-only marker as a positional-only one: the one caller (TaskRun.effect) passes the five leading arguments by position and every option by keyword",
    (
        "sdk/effects.py",
        "_name",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def _name(fn: Callable[..., object] & None) -> str | None:",
    ): "an annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/effects.py",
        "_name",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def _name(fn: Callable[..., object] | None) -> str & None:",
    ): "an annotation, never evaluated (the module has `from __future__ import annotations`)",
    # -- the decision loop (session 8) ----------------------------------------------------
    (
        "sdk/loop.py",
        "task",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "first_error: BaseException & None = None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/loop.py",
        "step",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "phase: str & None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/loop.py",
        "step",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "dependency: str & None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/loop.py",
        "step",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "guard: dict[str, Any] & None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/loop.py",
        "step",
        "core/ReplaceBinaryOperator_Mul_Div",
        "/,",
    ): "the keyword-only marker as a positional-only one: the one caller (RunSteps._step) passes the five leading arguments by position and phase, dependency, guard by keyword",
    (
        "sdk/loop.py",
        "step",
        "core/ReplaceComparisonOperator_IsNot_NotEq",
        "if attempt != entered:  # a retry of this step began it; the task goes on in it",
    ): "Attempt is a dataclass compared field by field: two attempts of a task differ in number and correlation id, so != and `is not` agree",
    (
        "sdk/stopping.py",
        "stop",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def stop(run: TaskRun, verdict: Verdict, error: BaseException & None) -> Loop:",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/stopping.py",
        "stop",
        "core/ReplaceComparisonOperator_Is_Eq",
        "if verdict.decision == Decision.HANDOFF_HUMAN:",
    ): "a verdict's decision is always a Decision member, which equals only itself: == and is agree",
    (
        "sdk/stopping.py",
        "stop",
        "core/ReplaceComparisonOperator_Is_Eq",
        "if verdict.decision == Decision.CANCEL_CHAIN:",
    ): "a verdict's decision is always a Decision member, which equals only itself: == and is agree",
    (
        "sdk/stopping.py",
        "build_package",
        "core/ReplaceAndWithOr",
        "if package.errors or last is not None:",
    ): "a task's failure records and its last failure are set together (RunRecords.record_failure sets last_failure and appends the record), so the package has errors exactly when there is a last failure: `and` and `or` agree",
    (
        "sdk/steps.py",
        "_step",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "phase: str & None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/steps.py",
        "_step",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "dependency: str & None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/steps.py",
        "complete_step",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def complete_step(self, name: str, output: Any = None, *, fact: str & None = None) -> None:",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/steps.py",
        "call_name",
        "core/ReplaceComparisonOperator_Eq_LtE",
        'return name if seen <= 1 else f"{name}#{seen}"',
    ): "a call's count starts at 1 (`get(name, 0) + 1`): `seen <= 1` and `seen == 1` agree",
    (
        "sdk/steps.py",
        "step_succeeded",
        "core/ReplaceAndWithOr",
        "usage = usage_of(output) if attempt is not None or type(output) not in _PLAIN else None",
    ): "_PLAIN is a shortcut: usage_of finds no usage in a str (JSON-looking included), number, bool, None or bytes, and a usage found without an attempt is not used (the next line checks the attempt again)",
    (
        "sdk/steps.py",
        "complete_step",
        "core/ReplaceBinaryOperator_Mul_Div",
        "def complete_step(self, name: str, output: Any = None, /, fact: str | None = None) -> None:",
    ): "the keyword-only marker as a positional-only one: every caller (step_succeeded, the simulation, the tests) passes name and output by position and fact by keyword",
}
