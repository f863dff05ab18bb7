"""Mutation targets: the provider hook's HTTP road under the adapters (issue 21, session 10).

A plain httpx client's resend decided before it goes out (:mod:`sdk.integrations.providers.client_retries`),
what a verdict comes to when the retry can only resend the client's request
(:mod:`sdk.integrations.providers.resent_verdicts`), and the one guard of an observer's operations
(:mod:`sdk.integrations.providers.operations`).
"""

from __future__ import annotations

from .target import Equivalent, Target

_BOUND = "tests/sdk/test_adapters_bound_plain_httpx.py"
_AS_SENT = "tests/sdk/test_adapters_decisions_as_sent.py"
#: the store-backed test of that file is left out (a mutant costs one pytest start)
_NO_STORE = ("--deselect", f"{_AS_SENT}::test_the_analytics_count_the_fallback_the_provider_saw")

TARGETS: dict[str, Target] = {
    # the resend decided before it is sent: the tenacity runs (sync, async, each stop) meet it
    "resend_bound": Target(
        "sdk/integrations/providers/client_retries.py",
        ("before_send", "abefore_send", "_resend"),
        (_BOUND, "-k", "tenacity"),  # also the resend's wait, a stop in it, a request elsewhere
    ),
    # a stainless client's try: the fallback model written in, the verdict as resent
    "resend_decide": Target(
        "sdk/integrations/providers/client_retries.py",
        ("_decide", "_switched"),
        tuple(
            f"{_AS_SENT}::test_{name}"
            for name in (
                "a_fallback_model_is_the_model_the_resend_asks_for",
                "an_open_breaker_whose_fallback_the_request_cannot_use_stops_the_resends",
                "a_fallback_the_request_cannot_name_is_recorded_as_a_resend_of_the_same_request",
                "a_call_without_a_json_model_is_decided_as_any_other",
                "a_failed_try_is_recorded_with_the_time_its_request_took",
            )
        )
        # a try that succeeds after the governor's retries: the response is built from cast_to
        + (
            "tests/sdk/test_adapters_client_retries.py::test_tenacity_hooks_count_the_clients_retries_as_attempts",
        ),
    ),
    "resent_verdicts": Target(
        "sdk/integrations/providers/resent_verdicts.py",
        ("as_resent", "resent", "switched_model", "model_of"),
        (_AS_SENT, *_NO_STORE),
    ),
    "operations": Target(
        "sdk/integrations/providers/operations.py",
        ("begin", "end"),
        ("--noconftest", "tests/sdk/test_observed_operations.py"),
    ),
}

_ANNOTATION = "an annotation: a string under `from __future__ import annotations`, never evaluated"

_WAIT_SCALE = (
    "the client's own wait, read from a monotonic clock, off by 0.1 %: below a millisecond for "
    "any wait a test can make, inside the clock's and the scheduler's noise"
)

EQUIVALENT: Equivalent = {
    (
        "sdk/integrations/providers/operations.py",
        "end",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def end(observer: Any, operation: Any, error: BaseException & None, result: Any) -> None:",
    ): _ANNOTATION,
    (
        "sdk/integrations/providers/client_retries.py",
        "_resend",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def _resend(self, request: Any) -> tuple[Verdict, BaseException] & None:",
    ): _ANNOTATION,
    **{
        ("sdk/integrations/providers/client_retries.py", "_resend", "core/NumberReplacer", line): _WAIT_SCALE
        for line in (
            "waited_ms = int((time.monotonic() - self.last_end) * 1001)",
            "waited_ms = int((time.monotonic() - self.last_end) * 999)",
        )
    },
    **{
        (
            "sdk/integrations/providers/client_retries.py",
            "_decide",
            "core/ReplaceBinaryOperator_BitOr_BitAnd",
            line,
        ): _ANNOTATION
        for line in (
            "def _decide(self, error: BaseException, model: str | None) -> Verdict & None:",
            "def _decide(self, error: BaseException, model: str & None) -> Verdict | None:",
        )
    },
    (
        "sdk/integrations/providers/client_retries.py",
        "_switched",
        "core/NumberReplacer",
        "return (args[0], resent_verdicts.switched_model(args[1], run.state), *args[ 3:])",
    ): "a stainless client calls request(cast_to, options) with every other argument by keyword: "
    "args[2:] and args[3:] are both empty",
    (
        "sdk/integrations/providers/resent_verdicts.py",
        "as_resent",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def as_resent(state: TaskState, model: str & None) -> Callable[[Verdict], Verdict]:",
    ): _ANNOTATION,
    (
        "sdk/integrations/providers/resent_verdicts.py",
        "resent",
        "core/ReplaceComparisonOperator_Eq_Is",
        'if verdict.rule is "protect_dependency":',
    ): "a rule's name is an identifier-like literal (a class attribute), interned by CPython "
    "as the literal compared with: `is` and `==` agree",
    (
        "sdk/integrations/providers/resent_verdicts.py",
        "resent",
        "core/ReplaceComparisonOperator_Is_Eq",
        "if decision == Decision.DEGRADE_DEPENDENCY and verdict.fallback:",
    ): "Decision is an enum: its members are singletons, `==` is identity",
    (
        "sdk/integrations/providers/resent_verdicts.py",
        "model_of",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def model_of(options: Any) -> str & None:",
    ): _ANNOTATION,
}
