"""Mutation targets of the tenant budgets: a key over its bytes, or a project over its CPU seconds,
is refused (429, a hold, ``Retry-After``) before its body is read, every other tenant untouched,
the local token never charged, and the CPU charged is what the work measured (issue 36's budget,
pinned by issue 38 round two's "every module that carries a guarantee").

The pure exact file first (the middleware on a hand-turned clock, ~0.2 s), so ``-x`` stops most
mutants there; then the chDB tests of the same guarantee through the real app.
"""

from __future__ import annotations

from .target import Equivalent, Target

_EXACT = "tests/api/test_ingest_budget_exact.py"
_COST = "tests/api/test_cost_budget.py"
_BYTES = "tests/api/test_ingest_budget.py"

TARGETS: dict[str, Target] = {
    "token_buckets": Target(
        "api/token_buckets.py",
        ("_refilled", "wait_s", "take"),
        (_EXACT, _BYTES, _COST),
    ),
    "cost_budget": Target(
        "api/cost_budget.py",
        ("__post_init__", "wait_s", "charge", "payers"),
        (_EXACT, _COST),
    ),
    "ingest_budget": Target(
        "api/ingest_budget.py",
        ("__init__", "__call__", "counted", "_tenant", "_header", "_over_bytes", "_over_cost", "_too_many"),
        (_EXACT, _BYTES, _COST),
    ),
    "measured": Target(
        "api/measured.py",
        ("result", "measured"),
        (_EXACT, _COST),
    ),
}

_ANNOTATION = "an annotation, never evaluated (from __future__ import annotations)"
_CAPPED = ("a charge of zero takes nothing, and a negative one (thread_time never goes back, so none is measured) "
           "is undone by the bucket's cap on its next read or take (min(burst, ...) in _refilled): no wait_s differs")

#: the receive messages of an http scope (the ASGI specification): the request's body parts and the disconnect
_MESSAGES = ('an http scope receives only "http.request" and "http.disconnect" (ASGI), and the disconnect has no '
             "body: taking len(b\"\") = 0 bytes from it changes no bucket")
_NEVER_NEGATIVE = "a wait is never negative (0.0, or minus a negative token count over a positive rate): != 0 is > 0"

EQUIVALENT: Equivalent = {
    ("api/ingest_budget.py", "_header", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def _header(scope: Scope, name: bytes) -> str & None:"): _ANNOTATION,
    ("api/ingest_budget.py", "_tenant", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def _tenant(self, scope: Scope) -> frozenset[str] & None:"): _ANNOTATION,
    ("api/ingest_budget.py", "__init__", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "cost: CostBudget & None = None, hold_s: float = REFUSAL_HOLD_S,"): _ANNOTATION,
    ("api/ingest_budget.py", "counted", "core/ReplaceComparisonOperator_Eq_LtE",
     'if message["type"] <= "http.request":'): _MESSAGES + ' ("http.disconnect" sorts before)',
    ("api/ingest_budget.py", "counted", "core/ReplaceComparisonOperator_Eq_GtE",
     'if message["type"] >= "http.request":'): _MESSAGES + ' ("http.disconnect" sorts before, so it is not taken)',
    ("api/ingest_budget.py", "counted", "core/ReplaceComparisonOperator_Eq_IsNot",
     'if message["type"] is not "http.request":'):
        _MESSAGES + '; "http.request" holds a dot, so CPython does not intern it and the server\'s message '
        "(built from its own constant) is never this module's object: `is not` is true for both messages",
    ("api/ingest_budget.py", "_tenant", "core/ReplaceComparisonOperator_NotEq_IsNot",
     'if scope["type"] is not "http" or scope.get("method") != "POST" or scope.get("path") not in INGEST_PATHS:'):
        '"http" is an identifier-like literal, which CPython interns: the server\'s scope type is this object '
        "exactly when it is equal",
    ("api/ingest_budget.py", "_tenant", "core/ReplaceComparisonOperator_NotEq_Gt",
     'if scope["type"] > "http" or scope.get("method") != "POST" or scope.get("path") not in INGEST_PATHS:'):
        'the ASGI scope types are "http", "lifespan" and "websocket": both others sort after "http", so > is != '
        "(tests/api/test_ingest_budget_exact.py passes both through)",
    ("api/ingest_budget.py", "__call__", "core/ReplaceComparisonOperator_Gt_NotEq",
     "if in_debt != 0:"): _NEVER_NEGATIVE + " (CostBudget.wait_s: a max of such waits, default 0.0)",
    ("api/ingest_budget.py", "__call__", "core/ReplaceComparisonOperator_Gt_NotEq",
     "if wait != 0:"): _NEVER_NEGATIVE + " (TokenBuckets.wait_s)",
    ("api/ingest_budget.py", "__init__", "core/ReplaceComparisonOperator_Gt_NotEq",
     "self.buckets = TokenBuckets(float(rate_bytes), float(burst_bytes), clock) if rate_bytes != 0 else None"):
        "a negative rate never reaches it: the server's one source, Settings.api_ingest_rate_bytes, is ge=0 "
        "(a negative value is refused at start-up), so rate_bytes != 0 is rate_bytes > 0 for every rate it gets",
    ("api/cost_budget.py", "payers", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def payers(projects: frozenset[str] & None, named: str | None) -> frozenset[str]:"): _ANNOTATION,
    ("api/cost_budget.py", "payers", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def payers(projects: frozenset[str] | None, named: str & None) -> frozenset[str]:"): _ANNOTATION,
    ("api/cost_budget.py", "charge", "core/ReplaceComparisonOperator_LtE_Eq",
     "if not projects or cpu_s == 0:"): _CAPPED,
    ("api/cost_budget.py", "charge", "core/ReplaceComparisonOperator_LtE_Lt",
     "if not projects or cpu_s < 0:"): _CAPPED,
    ("api/cost_budget.py", "charge", "core/NumberReplacer",
     "if not projects or cpu_s <= -1:"): _CAPPED,
    ("api/token_buckets.py", "wait_s", "core/ReplaceComparisonOperator_GtE_Gt",
     "return 0.0 if bucket.tokens > 0 else -bucket.tokens / self.rate"):
        "at exactly 0 tokens it returns -0.0 / rate, which is -0.0: equal to 0.0, not > 0, and ceil(-0.0) is 0, "
        "so every caller (the middleware's `> 0` and Retry-After, CostBudget's max with default 0.0) reads it as 0",
}
