"""Mutation targets of alert delivery: the outbox's schedule and dedup, the dispatcher's verdicts
and lanes, and which receivers a rule's page goes to (issues 37 and 38)."""

from __future__ import annotations

from .target import Equivalent, Target

TARGETS: dict[str, Target] = {
    "alert_outbox": Target(
        "analytics/alert_outbox.py",
        ("backoff_s", "dedup_key", "open_incident", "close_incident", "enqueue", "due_lanes", "head",
         "record_failure", "_finish"),
        ("tests/analytics/test_alert_outbox.py",),
    ),
    "alert_delivery": Target(
        "analytics/alert_delivery.py",
        ("safe_url", "judge", "post_page", "deliver_lane", "_attempt", "run_once"),
        ("tests/analytics/test_alert_outbox.py",),
    ),
    "alert_receivers": Target(
        "analytics/alerts.py",
        # Which receivers get a page (issue 38 round two, bug 5) and the per-project cap: a
        # pure test first, then one API test (seconds a mutant).
        ("receivers", "check_rule_cap"),
        (
            "tests/analytics/test_alert_receivers.py",
            "tests/api/test_api_alert_rules.py::test_a_project_has_at_most_its_cap_of_rules_and_another_project_is_not_held_by_it",
            "tests/api/test_api_alert_rules.py::test_a_cap_lowered_below_what_a_project_has_refuses_its_next_rule",
        ),
    ),
    "alerts": Target(
        "analytics/alerts.py",
        # When a rule fires or resolves, what is queued and stored, the resolution of a rule
        # deleted or disabled while firing. chDB tests: about a minute a mutant on a quiet machine.
        # The exact file first (stored rows, reasons, log levels, wake-ups; session 19).
        ("evaluate_rule", "_record", "_retire"),
        ("tests/analytics/test_alert_evaluation_exact.py", "tests/analytics/test_alert_delivery.py"),
    ),
}

EQUIVALENT: Equivalent = {
    ("analytics/alerts.py", "_record", "core/ReplaceComparisonOperator_Eq_LtE",
     'level = logging.WARNING if change.status <= "firing" else logging.INFO'):
        'a notification is "firing" or "resolved", and "resolved" sorts after "firing": <= is ==',
    ("analytics/alerts.py", "_retire", "core/ReplaceComparisonOperator_NotEq_Gt",
     'if state["status"] > "firing" or state["rule_id"] in live or state["rule_id"] not in stored:'):
        '_record stores only "firing" and "resolved", and "resolved" sorts after "firing": > is !=',
    ("analytics/alerts.py", "evaluate_rule", "core/ReplaceBinaryOperator_Mul_Div",
     "def evaluate_rule(store: EventStore, rule: AlertRule, /, now: datetime, delivery: Delivery) -> list[Notification]:"):
        "its one caller (evaluate_alerts) passes the store and rule by position and now and delivery by name",
    ("analytics/alerts.py", "_record", "core/ReplaceComparisonOperator_Eq_Is",
     'level = logging.WARNING if change.status is "firing" else logging.INFO'):
        "a notification's status is one of the literals _notification writes, which CPython interns: "
        "`is` holds exactly when `==` does",
    ("analytics/alerts.py", "evaluate_rule", "core/ReplaceComparisonOperator_Eq_LtE",
     'firing = {s["slice_value"]: s for s in alert_states(store, rule.rule_id) if s["status"] <= "firing"}'):
        '_record stores only "firing" and "resolved", and "resolved" sorts after "firing": <= is ==',
    ("analytics/alert_outbox.py", "open_incident", "core/NumberReplacer",
     "return str(row[ -1])"): "the query selects one column: row[-1] is row[0]",
    ("analytics/alert_outbox.py", "record_failure", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def record_failure(self, delivery: Delivery, error: str, *, now: float, retry_after_s: float & None = None) -> State:"):
        "an annotation, never evaluated (from __future__ import annotations)",
    ("analytics/alert_outbox.py", "_finish", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def _finish(self, delivery: Delivery, state: State, error: str, now: float, *, attempts: int & None = None) -> None:"):
        "an annotation, never evaluated (from __future__ import annotations)",
    ("analytics/alert_outbox.py", "_finish", "core/ReplaceBinaryOperator_Mul_Div",
     "def _finish(self, delivery: Delivery, state: State, error: str, now: float, /, attempts: int | None = None) -> None:"):
        "every caller passes the first four by position and attempts by name: the same calls",
    ("analytics/alert_outbox.py", "open_incident", "core/ReplaceBinaryOperator_Mul_Div",
     "def open_incident(self, rule_id: str, slice_value: str, /, now: float) -> str:"):
        "every caller passes the rule and slice by position and now by name: the same calls",
    ("analytics/alert_outbox.py", "close_incident", "core/ReplaceBinaryOperator_Mul_Div",
     "def close_incident(self, rule_id: str, slice_value: str, /, opened_at: float, now: float) -> str:"):
        "every caller passes the rule and slice by position and the times by name: the same calls",
    ("analytics/alert_outbox.py", "enqueue", "core/ReplaceBinaryOperator_Mul_Div",
     "def enqueue(self, /, project: str, receiver: str, trusted: bool, payload: dict[str, Any], now: float) -> bool:"):
        "every caller passes every argument by name: making only self positional changes no call",
    ("analytics/alert_outbox.py", "head", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def head(self, lane: tuple[str, str], now: float) -> Delivery & None:"):
        "an annotation, never evaluated (from __future__ import annotations)",
    ("analytics/alert_outbox.py", "enqueue", "core/ReplaceComparisonOperator_Eq_GtE",
     "return cursor.rowcount >= 1"): "an INSERT of one row reports 0 or 1 rows: >= 1 is == 1",
    ("analytics/alert_delivery.py", "_attempt", "core/ReplaceComparisonOperator_Eq_Is",
     'if outcome.verdict is "delivered":'):
        "verdicts are string literals, which CPython interns: `is` holds exactly when `==` does",
    ("analytics/alert_delivery.py", "_attempt", "core/ReplaceComparisonOperator_Eq_LtE",
     'if outcome.verdict <= "delivered":'):
        'the verdicts are "delivered", "give_up" and "retry": only "delivered" sorts at or before it',
    ("analytics/alert_delivery.py", "deliver_lane", "core/ReplaceComparisonOperator_Eq_LtE",
     'sent += state <= "delivered"'):
        'the states reaching it are "delivered" and "gave_up" ("pending" stops the lane): only the first sorts before',
    ("analytics/alert_delivery.py", "_attempt", "core/ReplaceComparisonOperator_Eq_Is",
     'if outcome.verdict is "give_up":'):
        "verdicts are string literals, which CPython interns: `is` holds exactly when `==` does",
    ("analytics/alert_delivery.py", "_attempt", "core/ReplaceComparisonOperator_Eq_Is",
     '"given up" if state is "gave_up" else "will retry")'):
        "states are string literals, which CPython interns: `is` holds exactly when `==` does",
    ("analytics/alert_delivery.py", "judge", "core/NumberReplacer",
     "if 299 <= status < 400:"): "a 299 has returned as delivered two lines above",
    ("analytics/alert_delivery.py", "deliver_lane", "core/ReplaceComparisonOperator_Eq_GtE",
     'if state >= "pending":'): 'of "delivered", "gave_up" and "pending" only "pending" sorts at or after it',
    ("analytics/alert_delivery.py", "deliver_lane", "core/ReplaceComparisonOperator_Eq_Is",
     'sent += state is "delivered"'):
        "states are string literals, which CPython interns: `is` holds exactly when `==` does",
    ("analytics/alert_delivery.py", "_attempt", "core/ReplaceComparisonOperator_Eq_LtE",
     'if outcome.verdict <= "give_up":'):
        'a "delivered" verdict has returned above; of "give_up" and "retry" only "give_up" sorts at or before it',
    ("analytics/alert_delivery.py", "deliver_lane", "core/ReplaceComparisonOperator_Eq_Is",
     'if state is "pending":'):
        "states are string literals, which CPython interns: `is` holds exactly when `==` does",
    ("analytics/alert_delivery.py", "_attempt", "core/ReplaceComparisonOperator_Eq_LtE",
     '"given up" if state <= "gave_up" else "will retry")'):
        'record_failure returns "gave_up" or "pending", and "pending" sorts after "gave_up"',
    ("analytics/alert_delivery.py", "safe_url", "core/NumberReplacer",
     'path = f"/{first}" + ("/***" if rest and rest[ -1] else "") if parts.path else ""'):
        "split(..., 1) leaves at most one element in rest: rest[-1] is rest[0]",
    ("analytics/alerts.py", "check_rule_cap", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def check_rule_cap(store: EventStore, project: str & None, cap: int) -> None:"):
        "an annotation, never evaluated (from __future__ import annotations)",
    ("analytics/alert_outbox.py", "record_failure", "core/ReplaceBinaryOperator_Mul_Div",
     "def record_failure(self, delivery: Delivery, error: str, /, now: float, retry_after_s: float | None = None) -> State:"):
        "every caller passes the error by position and now/retry_after_s by name: the same calls",
}
