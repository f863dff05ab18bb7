"""Mutation targets: what outside input is mapped to (OTLP spans) and what reports decide (issue 25)."""

from __future__ import annotations

from .target import Equivalent, Target

_STATUS_TESTS = (
    "a_failed_operation_is_typed_from_its_status_and_text",
    "a_status_is_a_number_from_0_to_999",
    "a_request_fails_from_status_400_up",
    "a_status_attribute_on_an_operation_span_without_error_is_no_failure",
    "a_failed_tool_that_says_nothing_more_is_a_tool_error",
    "the_error_detail_says_what_the_span_said",
    "http_requests_are_the_attempts_of_their_genai_span_in_resend_order",
    "an_old_http_method_attribute_also_marks_a_request",
)

TARGETS: dict[str, Target] = {
    "otlp": Target(
        "api/otlp.py",
        (
            "is_operation",
            "trace_events",
            "_operation_kind",
            "of",
            "http_requests",
            "_is_http",
            "failed",
            "_status",
            "_attempt",
            "classify",
            "_event",
            "_ms",
            "_int",
        ),
        # --noconftest: these tests need no fixture, and the conftests (the app, the store)
        # cost four times the tests' own run on every mutant
        (
            "--noconftest",
            "tests/api/test_otlp_mapping_guarantees.py",
        ),
    ),
    # the status classification alone (a span's status and text -> its error type), to run
    # again when only that changes (429 and 529 -> rate_limit, session 9), with the tests of
    # the mapping that read a status or type a failure
    "otlp_status": Target(
        "api/otlp.py",
        ("_status", "classify"),
        (
            "--noconftest",
            *(f"tests/api/test_otlp_mapping_guarantees.py::test_{name}" for name in _STATUS_TESTS),
        ),
    ),
    "recommendation": Target(
        "evaluation/report.py",
        ("_evidence", "__post_init__", "_verdict", "recommend", "pct"),
        (
            "--noconftest",
            "tests/evaluation/test_eval_recommend.py",
            "tests/evaluation/test_recommend_guarantees.py",
            "tests/evaluation/test_recommend_wording.py",
        ),
    ),
}

_SEEDS = (
    "the loop's first unit (i == 0) sets attempt to 1 and first to itself; the seeds "
    "`attempt, first = 0, units[0][0]` give the same through the other branch "
    "(attempt + 1, first kept), so either way the first unit is attempt 1 of itself"
)
_CLAMPED = "`_int` reads a negative count as 0: a default of -1 is the default 0"

EQUIVALENT: Equivalent = {
    (
        "api/otlp.py",
        "trace_events",
        "core/NumberReplacer",
        "attempt, first = 0, units[0][ 1]",
    ): _SEEDS,
    (
        "api/otlp.py",
        "trace_events",
        "core/NumberReplacer",
        "attempt, first = 0, units[0][ -1]",
    ): _SEEDS,
    (
        "api/otlp.py",
        "trace_events",
        "core/NumberReplacer",
        "attempt, first = 0, units[ -1][0]",
    ): _SEEDS,
    (
        "api/otlp.py",
        "trace_events",
        "core/NumberReplacer",
        "attempt, first = 1, units[0][0]",
    ): _SEEDS,
    (
        "api/otlp.py",
        "trace_events",
        "core/NumberReplacer",
        "attempt, first = -1, units[0][0]",
    ): _SEEDS,
    (
        "api/otlp.py",
        "trace_events",
        "core/ReplaceComparisonOperator_Eq_Lt",
        "if i < 0 or not failed(units[i - 1][0]):",
    ): _SEEDS,
    (
        "api/otlp.py",
        "trace_events",
        "core/ReplaceComparisonOperator_Eq_LtE",
        "if i <= 0 or not failed(units[i - 1][0]):",
    ): "i counts from 0: `i <= 0` is `i == 0`",
    (
        "api/otlp.py",
        "_attempt",
        "core/NumberReplacer",
        'usage.get("llm.token_count.prompt", -1))))',
    ): _CLAMPED,
    (
        "api/otlp.py",
        "_attempt",
        "core/NumberReplacer",
        'usage.get("llm.token_count.completion", -1))))',
    ): _CLAMPED,
}
_ANNOTATION = "an annotation: a string under `from __future__ import annotations`, never evaluated"
_ANNOTATED = {
    "trace_events": (
        "chains: dict[tuple[str & None, str], list[Span]] = {}",
        "last: tuple[int, bool] & None = None  # (end, failed) of the latest attempt",
    ),
    "_status": ("def _status(span: Span) -> int & None:",),
    "_attempt": (
        "def _attempt(base: dict[str, Any], span: Span, attempt: int, correlation: str, "
        "following: Span & None,",
        "root: Span & None, prices: dict[str, tuple[float, float]], op: Span,",
    ),
    "classify": ("def classify(span: Span) -> tuple[ErrorType, int & None]:",),
}
EQUIVALENT.update(
    {
        ("api/otlp.py", function, "core/ReplaceBinaryOperator_BitOr_BitAnd", line): _ANNOTATION
        for function, lines in _ANNOTATED.items()
        for line in lines
    }
)
_ROOTS_APART = (
    "only attempt events carry `_seq`; the task's start and end are kept apart from them by "
    "`_PLACE` first, so the default given to the two root events is never compared"
)
EQUIVALENT.update(
    {
        (
            "api/otlp.py",
            "trace_events",
            "core/NumberReplacer",
            'out.sort(key=lambda e: (_PLACE.get(e["kind"], 1), e.pop("_ns"), '
            f'e.pop("_seq", {seq}), _ORDER[e["kind"]]))',
        ): _ROOTS_APART
        for seq in (-1, 1)
    }
)
EQUIVALENT.update(
    {
        (
            "api/otlp.py",
            "trace_events",
            "core/ReplaceComparisonOperator_Lt_NotEq",
            "following = units[i + 1][0] if i + 1 != len(units) else None",
        ): "i < len(units), so i + 1 <= len(units): `!=` is `<`",
        **{
            (
                "api/otlp.py",
                "trace_events",
                "core/NumberReplacer",
                f"end = max(root.end_ns, last[0] if last else {default})",
            ): "this line runs only when root.end_ns is set (a time in ns since 1970, unsigned "
            "in OTLP, so at least 1): the root's end is larger than any default of -1, 0 or 1"
            for default in (-1, 1)
        },
    }
)
EQUIVALENT.update(
    {
        (
            "api/otlp.py",
            "trace_events",
            "core/NumberReplacer",
            "if i == -1 or not failed(units[i - 1][0]):",
        ): _SEEDS,
        (
            "api/otlp.py",
            "_attempt",
            "core/ReplaceTrueWithFalse",
            "with_usage: bool = False) -> list[dict[str, Any]]:",
        ): "a default never used: the one caller, trace_events, always passes with_usage",
    }
)
EQUIVALENT.update(
    {
        (
            "api/otlp.py",
            "trace_events",
            "core/ReplaceComparisonOperator_Is_Eq",
            "units = [(unit, op, unit == requests.of(op)[-1]) for op in chain for unit in "
            "requests.of(op)]",
        ): "spans are dataclasses compared field by field, and two spans of a trace never "
        "share a span id (the trace's spans are a dict keyed by it): `==` is `is`",
        (
            "api/otlp.py",
            "http_requests",
            "core/NumberReplacer",
            "requests.sort(key=lambda s: (s.start_ns, "
            '_int(s.attrs.get("http.request.resend_count", -1)), s.span_id))',
        ): _CLAMPED,
    }
)
_UNUSED_SCORE = (
    "the score is read only for a `better` or `cheaper` verdict: a losing one's is never used"
)
_SHARE = (
    "a cheaper candidate's score is its sure saving as a share of the live cost, at most 1 "
    "(a cost per task is never negative), so a better candidate's 1 + lo stays above it "
    "as 2 + lo does; and the floor only matters for a live cost of zero (then 1e-12 and "
    "1.000000000001 rank cheaper candidates alike)"
)
_LOSING_LINES = (
    'f"(more than {MAX_IMPUTED_SHARE:.0%})", SCORE)',
    'f"bound is below the {margins.success:.1%} margin", SCORE)',
    'return ("worse", f"success rate {pct(success[\'value\'])} ({ci})", SCORE)',
    "f\"{cost['value']:+.5f} USD ({cost_ci}): no difference beyond the uncertainty\", SCORE)",
)
EQUIVALENT.update(
    {
        ("evaluation/report.py", "_verdict", "core/NumberReplacer", line.replace("SCORE", score)): (
            _UNUSED_SCORE
        )
        for line in _LOSING_LINES
        for score in ("1.0", "-1.0")
    }
)
EQUIVALENT.update(
    {
        (
            "evaluation/report.py",
            "_verdict",
            "core/NumberReplacer",
            'f"at cost per task {cost[\'value\']:+.5f} USD", 2.0 + success["lo"])',
        ): _SHARE,
        (
            "evaluation/report.py",
            "_verdict",
            "core/NumberReplacer",
            '-cost["hi"] / max(abs(live_cost), 1.000000000001))',
        ): _SHARE,
        **{
            (
                "evaluation/report.py",
                "recommend",
                "core/NumberReplacer",
                'live_cost = float(policies[0]["estimates"]["cost_usd"]["value"]) '
                f"if policies else {cost}",
            ): "without policies there is no candidate to judge: the live cost is never read"
            for cost in ("1.0", "-1.0")
        },
    }
)
EQUIVALENT.update(
    {
        (
            "evaluation/report.py",
            "_verdict",
            "core/ReplaceComparisonOperator_Lt_NotEq",
            'if success["lo"] > -margins.success_tolerance and cost["hi"] <= -saving and '
            'cost["hi"] != 0:',
        ): "the saving is a non-negative share of the live cost (margins are refused below 0), "
        "so the clause before it leaves hi <= 0: `hi != 0` is `hi < 0`",
        (
            "evaluation/report.py",
            "recommend",
            "core/ReplaceBinaryOperator_BitOr_BitAnd",
            "def recommend(policies: list[dict[str, Any]], margins: Margins & None = None) -> "
            "dict[str, Any]:",
        ): "an annotation: a string under `from __future__ import annotations`, never evaluated",
    }
)
EQUIVALENT.update(
    {
        (
            "evaluation/report.py",
            "pct",
            "core/ReplaceComparisonOperator_Eq_LtE",
            "while digits < 2 and value and round(abs(value) * 100, digits) <= 0:",
        ): "a rounded absolute value is never below zero: <= 0 is == 0",
        (
            "evaluation/report.py",
            "pct",
            "core/ReplaceComparisonOperator_Lt_NotEq",
            "while digits != 2 and value and round(abs(value) * 100, digits) == 0:",
        ): "digits starts at 1 and grows by one to at most 2: != 2 is < 2",
    }
)
