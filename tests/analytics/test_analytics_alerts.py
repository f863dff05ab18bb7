"""Alert rules fire once per breach, resolve, and notify a webhook and the log."""

from __future__ import annotations

import json
import logging
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from analytics_eventset import T0, T1, load

from retrylens.analytics.alert_delivery import Dispatcher
from retrylens.analytics.alert_outbox import Outbox
from retrylens.analytics.alerts import (
    AlertRule,
    alert_history,
    alert_states,
    evaluate_alerts,
    list_rules,
    save_rule,
)
from retrylens.analytics.filters import Slice

pytestmark = pytest.mark.clickhouse


@pytest.fixture
def webhook():
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", received
    server.shutdown()
    server.server_close()


def test_rule_validation_names_the_problem():
    with pytest.raises(ValueError, match="unknown metric"):
        AlertRule(name="x", metric="nope", op=">", threshold=1)
    with pytest.raises(ValueError, match="unknown dimension"):
        AlertRule(name="x", metric="retry_rate", op=">", threshold=1, per="colour")


def test_rules_round_trip(store):
    rule = save_rule(store, AlertRule(name="retries", metric="retry_rate", op=">", threshold=0.3,
                                      where=Slice(project="alpha"), per="agent"))
    assert list_rules(store) == [rule]


def _deliver(outbox: Outbox, allowed_hosts: tuple[str, ...] = ()) -> None:
    """Post what is queued (on the outbox's clock every page is due from when it was queued)."""
    Dispatcher(outbox, allowed_hosts=allowed_hosts, timeout_s=2).run_once()


def test_fires_once_per_breach_then_resolves(store, webhook, caplog):
    url, received = webhook
    local = ("127.0.0.1:*",)  # the test's receiver: a private address, allowed as an operator would allow a relay
    load(store)
    save_rule(store, AlertRule(name="planner retries", metric="retry_rate", op=">", threshold=0.3,
                               window_minutes=60, where=Slice(project="alpha"), per="agent", webhook_url=url))
    during, outbox = T0 + timedelta(minutes=55), Outbox()
    with caplog.at_level(logging.WARNING, logger="retrylens.alerts"):
        fired = evaluate_alerts(store, now=during, outbox=outbox)
    assert [(n.slice_value, n.status) for n in fired] == [("planner", "firing")]
    assert fired[0].value == pytest.approx(0.5)
    assert "FIRING alpha · planner retries (agent planner): retry_rate = 0.5, above 0.3 over the last 60 min" in caplog.text
    assert evaluate_alerts(store, now=during + timedelta(minutes=1), outbox=outbox) == []  # still breached
    resolved = evaluate_alerts(store, now=T1 + timedelta(hours=3), outbox=outbox)  # window holds no planner calls
    assert [(n.slice_value, n.status) for n in resolved] == [("planner", "resolved")]
    _deliver(outbox, local)
    assert [r["status"] for r in received] == ["firing", "resolved"]
    assert received[0]["rule_name"] == "planner retries"
    assert [s["status"] for s in alert_states(store)] == ["resolved"]
    assert [h["status"] for h in alert_history(store)] == ["resolved", "firing"]


def test_unreachable_webhook_is_logged_not_raised(store, caplog):
    load(store)
    save_rule(store, AlertRule(name="handoffs", metric="handoffs", op=">=", threshold=1, window_minutes=60,
                               where=Slice(project="alpha"), webhook_url="http://127.0.0.1:9/none"))
    outbox = Outbox()
    with caplog.at_level(logging.ERROR, logger="retrylens.alerts"):
        fired = evaluate_alerts(store, now=T0 + timedelta(minutes=55), outbox=outbox)
        _deliver(outbox, ("127.0.0.1:9",))
    assert [n.status for n in fired] == ["firing"]
    assert "alert webhook" in caplog.text and "will retry" in caplog.text
    assert [d.state for d in outbox.deliveries()] == ["pending"] and not alert_history(store)[0]["delivered"]


def test_a_rule_webhook_to_a_private_address_is_refused_unless_its_host_is_allowed(store, webhook, caplog):
    """A rule's webhook is set by whoever holds the project's key; the server must not post into its own network."""
    url, received = webhook
    load(store)
    save_rule(store, AlertRule(name="handoffs", metric="handoffs", op=">=", threshold=1, window_minutes=60,
                               where=Slice(project="alpha"), webhook_url=url))
    outbox = Outbox()
    with caplog.at_level(logging.ERROR, logger="retrylens.alerts"):
        fired = evaluate_alerts(store, now=T0 + timedelta(minutes=55), outbox=outbox)
        _deliver(outbox)
    assert [n.status for n in fired] == ["firing"]  # the alert fires and is recorded; only the post is refused
    assert received == [] and [d.state for d in outbox.deliveries()] == ["gave_up"]
    assert "127.0.0.1" in caplog.text and "RETRYLENS_ALERT_WEBHOOK_HOSTS" in caplog.text
    resolved = evaluate_alerts(store, now=T1 + timedelta(hours=3), outbox=outbox)
    _deliver(outbox, ("127.0.0.1:*",))
    assert [n.status for n in resolved] == ["resolved"] and [r["status"] for r in received] == ["resolved"]


def test_the_servers_own_webhook_is_the_operators_choice_and_not_refused(store, webhook):
    url, received = webhook
    load(store)
    save_rule(store, AlertRule(name="handoffs", metric="handoffs", op=">=", threshold=1, window_minutes=60,
                               where=Slice(project="alpha")))
    outbox = Outbox()
    evaluate_alerts(store, now=T0 + timedelta(minutes=55), webhook_url=url, outbox=outbox)
    _deliver(outbox)
    assert [r["status"] for r in received] == ["firing"]


def test_a_rule_with_a_receiver_and_no_outbox_is_an_error_not_a_silent_drop(store):
    load(store)
    save_rule(store, AlertRule(name="handoffs", metric="handoffs", op=">=", threshold=1, window_minutes=60,
                               where=Slice(project="alpha"), webhook_url="https://8.8.8.8/hook"))
    with pytest.raises(ValueError, match="no outbox"):
        evaluate_alerts(store, now=T0 + timedelta(minutes=55))
