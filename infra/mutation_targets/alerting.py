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
    "alerts": Target(
        "analytics/alerts.py",
        # Which receivers get a page, when a rule fires or resolves, and the resolution of a
        # rule deleted or disabled while firing; chDB tests (about 40 s a mutant).
        ("breached", "receivers", "evaluate_rule", "_record", "_retire", "evaluate_alerts", "check_rule_cap"),
        (
            "tests/analytics/test_alert_delivery.py",
            "tests/analytics/test_analytics_alerts.py",
            "tests/api/test_api_alert_rules.py::test_a_project_has_at_most_its_cap_of_rules_and_another_project_is_not_held_by_it",
        ),
    ),
}

EQUIVALENT: Equivalent = {}
