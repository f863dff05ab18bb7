"""Which receivers a rule's page goes to, with no store (mutation target ``alert_receivers``):
its own webhook (untrusted: checked before each post) instead of the server's, never both;
else the server's (the operator's, trusted); else none, the log only."""

from __future__ import annotations

from retrylens.analytics.alerts import AlertRule, receivers


def _rule(webhook_url: str = "") -> AlertRule:
    return AlertRule(name="r", metric="retry_rate", op=">", threshold=0.5, webhook_url=webhook_url)


def test_a_rule_with_its_own_webhook_pages_only_it_and_untrusted() -> None:
    assert receivers(_rule("https://hooks.example/a"), "https://ops.example/default") == [
        ("https://hooks.example/a", False)
    ]
    assert receivers(_rule("https://hooks.example/a"), "") == [("https://hooks.example/a", False)]


def test_a_rule_without_one_pages_the_servers_trusted_receiver_or_none() -> None:
    assert receivers(_rule(), "https://ops.example/default") == [("https://ops.example/default", True)]
    assert receivers(_rule(), "") == []
