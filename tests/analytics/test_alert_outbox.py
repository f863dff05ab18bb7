"""The outbox and the dispatcher alone (no store): order, schedule, dedup and give-up, in
virtual time, against real local receivers. Fast, so the mutation targets can run them."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from alert_receiver import Clock, Receiver

from retrylens.analytics.alert_delivery import Dispatcher, judge, safe_url
from retrylens.analytics.alert_outbox import GIVE_UP_AFTER_S, Outbox, backoff_s, dedup_key

T = 1_800_000_000.0


def page(status: str = "firing", key: str = "k1", rule: str = "r1", slice_value: str = "") -> dict[str, Any]:
    return {"dedup_key": key, "status": status, "rule_id": rule, "slice_value": slice_value, "rule_name": rule,
            "at": "2027-01-15T08:00:00+00:00"}


@pytest.fixture
def receiver():
    made = Receiver().start()
    yield made
    made.stop()


def test_the_backoff_doubles_from_five_seconds_up_to_five_minutes() -> None:
    assert [backoff_s(n) for n in range(0, 9)] == [5, 5, 10, 20, 40, 80, 160, 300, 300]


def test_an_incident_key_names_the_rule_the_slice_and_the_opening_millisecond() -> None:
    digest = hashlib.sha256(b"planner").hexdigest()[:12]
    assert dedup_key("r1", "planner", T + 0.25) == f"retrylens-r1-{digest}-1800000000250"


def test_an_open_incident_keeps_its_key_until_it_is_closed() -> None:
    outbox = Outbox()
    key = outbox.open_incident("r1", "planner", now=T)
    assert key == dedup_key("r1", "planner", T)
    assert outbox.open_incident("r1", "planner", now=T + 60) == key  # a re-firing: the same incident
    assert outbox.open_incident("r1", "coder", now=T + 60) != key  # another slice: another incident
    assert outbox.close_incident("r1", "planner", opened_at=T, now=T + 120) == key
    assert outbox.close_incident("r1", "planner", opened_at=T, now=T + 180) == key  # closed twice: still that key
    reopened = outbox.open_incident("r1", "planner", now=T + 240)
    assert reopened == dedup_key("r1", "planner", T + 240) and reopened != key


def test_closing_an_incident_the_outbox_never_saw_uses_the_key_its_opening_would_have_had() -> None:
    assert Outbox().close_incident("r1", "x", opened_at=T, now=T + 5) == dedup_key("r1", "x", T)


def test_a_page_queued_twice_is_sent_once(receiver: Receiver) -> None:
    outbox, clock = Outbox(), Clock(T)
    assert outbox.enqueue(project="p", receiver=receiver.url, trusted=True, payload=page(), now=T) is True
    assert outbox.enqueue(project="p", receiver=receiver.url, trusted=True, payload=page(), now=T + 1) is False
    assert Dispatcher(outbox, clock=clock).run_once() == 1
    assert Dispatcher(outbox, clock=clock).run_once() == 0
    assert len(receiver.posts) == 1


def test_pending_pages_survive_reopening_the_file(tmp_path: Path, receiver: Receiver) -> None:
    path = tmp_path / "outbox.sqlite3"
    first = Outbox(path)
    first.enqueue(project="p", receiver=receiver.url, trusted=True, payload=page(), now=T)
    first.close()
    assert Dispatcher(Outbox(path), clock=Clock(T)).run_once() == 1
    assert [r["dedup_key"] for r in receiver.received] == ["k1"]


def test_a_lane_keeps_its_order_a_resolution_never_overtakes_its_firing(receiver: Receiver) -> None:
    outbox, clock = Outbox(), Clock(T)
    receiver.fail_next = [503]
    outbox.enqueue(project="p", receiver=receiver.url, trusted=True, payload=page("firing"), now=T)
    outbox.enqueue(project="p", receiver=receiver.url, trusted=True, payload=page("resolved"), now=T)
    dispatcher = Dispatcher(outbox, clock=clock)
    assert dispatcher.run_once() == 0  # the firing failed: the resolution waits behind it
    assert [p["status"] for p in receiver.posts] == ["firing"]
    assert outbox.due_lanes(T + 4.9) == [] and outbox.due_lanes(T + 5) == [("p", receiver.url)]
    clock.advance(5)
    assert dispatcher.run_once() == 2
    assert [r["status"] for r in receiver.received] == ["firing", "resolved"]


def test_lanes_are_apart_a_down_receiver_does_not_hold_another(receiver: Receiver) -> None:
    outbox, clock = Outbox(), Clock(T)
    outbox.enqueue(project="a", receiver="http://127.0.0.1:9/down", trusted=True, payload=page(key="a"), now=T)
    outbox.enqueue(project="b", receiver=receiver.url, trusted=True, payload=page(key="b"), now=T)
    assert Dispatcher(outbox, clock=clock).run_once() == 1
    assert [r["dedup_key"] for r in receiver.received] == ["b"]
    (down,) = [d for d in outbox.deliveries() if d.project == "a"]
    assert (down.state, down.attempts, down.next_at) == ("pending", 1, T + 5)
    assert "ConnectError" in down.last_error


def test_a_retry_after_is_honoured_within_the_bounds() -> None:
    outbox = Outbox()
    outbox.enqueue(project="p", receiver="http://x.invalid/", trusted=True, payload=page(), now=T)
    (first,) = outbox.deliveries()
    assert outbox.record_failure(first, "HTTP 429", now=T, retry_after_s=3600) == "pending"
    (later,) = outbox.deliveries()
    assert later.next_at == T + 300  # never more than the cap
    outbox.record_failure(later, "HTTP 429", now=T + 300, retry_after_s=0)
    (soon,) = outbox.deliveries()
    assert soon.next_at == T + 305 and soon.attempts == 2  # never less than the base


def test_a_delivery_is_given_up_once_a_day_old_not_before() -> None:
    outbox = Outbox()
    outbox.enqueue(project="p", receiver="http://x.invalid/", trusted=True, payload=page(), now=T)
    (delivery,) = outbox.deliveries()
    assert outbox.record_failure(delivery, "down", now=T + GIVE_UP_AFTER_S - 1) == "pending"
    (delivery,) = outbox.deliveries()
    assert outbox.record_failure(delivery, "down", now=T + GIVE_UP_AFTER_S) == "gave_up"
    (delivery,) = outbox.deliveries()
    assert delivery.state == "gave_up" and delivery.attempts == 2
    assert delivery.last_error == "not acknowledged within 24 h; last: down"
    assert outbox.due_lanes(T + 10 * GIVE_UP_AFTER_S) == []


def test_a_delivery_first_failing_long_after_a_day_is_given_up_at_once() -> None:
    outbox = Outbox()
    outbox.enqueue(project="p", receiver="http://x.invalid/", trusted=True, payload=page(), now=T)
    (delivery,) = outbox.deliveries()
    assert outbox.record_failure(delivery, "down", now=T + 2 * GIVE_UP_AFTER_S) == "gave_up"


def test_the_tries_are_counted_to_the_acknowledgement_and_to_the_give_up(
    receiver: Receiver, caplog: pytest.LogCaptureFixture,
) -> None:
    outbox, clock = Outbox(), Clock(T)
    receiver.fail_next = [503, 503]
    outbox.enqueue(project="p", receiver=receiver.url, trusted=True, payload=page(key="acked"), now=T)
    dispatcher = Dispatcher(outbox, clock=clock)
    with caplog.at_level(logging.INFO, logger="retrylens.alerts"):
        for _ in range(3):
            dispatcher.run_once()
            clock.advance(60)
    assert "delivered after 2 failed tries" in caplog.text
    caplog.clear()
    receiver.fail_next = [404]
    outbox.enqueue(project="p", receiver=receiver.url, trusted=True, payload=page(key="refused"), now=clock.now)
    with caplog.at_level(logging.INFO, logger="retrylens.alerts"):
        dispatcher.run_once()
    assert "delivered after" not in caplog.text  # a first-time delivery or a give-up says nothing of earlier tries
    tries = {d.dedup_key: (d.state, d.attempts) for d in outbox.deliveries()}
    assert tries == {"acked": ("delivered", 3), "refused": ("gave_up", 1)}


@pytest.mark.parametrize(("status", "verdict"), [
    (200, "delivered"), (202, "delivered"), (204, "delivered"), (299, "delivered"),
    (408, "retry"), (425, "retry"), (429, "retry"), (500, "retry"), (503, "retry"),
    (301, "give_up"), (302, "give_up"), (400, "give_up"), (401, "give_up"), (404, "give_up"), (199, "give_up"),
])
def test_each_answer_is_judged_as_the_events_api_contract_says(status: int, verdict: str) -> None:
    assert judge(status).verdict == verdict


def test_retry_after_in_seconds_is_read_and_a_date_is_left_to_the_backoff() -> None:
    assert judge(429, "30").retry_after_s == 30
    assert judge(503, "Wed, 21 Oct 2015 07:28:00 GMT").retry_after_s is None
    assert judge(400, "30").retry_after_s is None


def test_a_rule_webhook_is_checked_before_each_post_and_the_operators_is_not(
    receiver: Receiver, caplog: pytest.LogCaptureFixture,
) -> None:
    outbox, clock = Outbox(), Clock(T)
    outbox.enqueue(project="p", receiver=receiver.url, trusted=False, payload=page(key="rule's"), now=T)
    outbox.enqueue(project="q", receiver=receiver.url, trusted=True, payload=page(key="operator's"), now=T)
    with caplog.at_level(logging.ERROR, logger="retrylens.alerts"):
        Dispatcher(outbox, clock=clock).run_once()
    assert [r["dedup_key"] for r in receiver.received] == ["operator's"]
    refused = next(d for d in outbox.deliveries() if d.project == "p")
    assert refused.state == "gave_up" and "RETRYLENS_ALERT_WEBHOOK_HOSTS" in refused.last_error
    Dispatcher(outbox, clock=clock, allowed_hosts=[f"127.0.0.1:{receiver.port}"]).run_once()
    assert len(receiver.received) == 1  # given up is given up


@pytest.mark.parametrize(("url", "shown"), [
    ("https://user:pw@hooks.example/x?token=abc&a=1", "https://***@hooks.example/x?token=***&a=***"),
    ("http://127.0.0.1:9000/hook", "http://127.0.0.1:9000/hook"),
    ("https://:secret@[::1]:8443/h", "https://***@[::1]:8443/h"),
    ("https://hooks.example/services/T0/B0/XyZ#frag", "https://hooks.example/services/***"),  # Slack's secret
    ("http://relay.internal", "http://relay.internal"),
    ("https://hooks.example/x?token=", "https://hooks.example/x?token=***"),  # even a blank value's name
    ("https://hooks.example/services//T0/secret", "https://hooks.example/services/***"),  # an empty segment
    ("https://hooks.example/x?to ken=1&k%26=2", "https://hooks.example/x?to+ken=***&k%26=***"),  # names still quoted
])
def test_a_logged_url_carries_no_credentials(url: str, shown: str) -> None:
    assert safe_url(url) == shown


def test_every_post_carries_the_incidents_key_as_its_idempotency_key(receiver: Receiver) -> None:
    outbox = Outbox()
    outbox.enqueue(project="p", receiver=receiver.url, trusted=True, payload=page(key="retrylens-r1-x-1"), now=T)
    Dispatcher(outbox, clock=Clock(T)).run_once()
    assert receiver.headers[0]["Idempotency-Key"] == "retrylens-r1-x-1"
    assert receiver.headers[0]["Content-Type"] == "application/json"


def test_the_reason_names_what_the_receiver_answered() -> None:
    assert judge(300).reason == "HTTP 300: redirects are not followed; give the final URL"
    assert judge(301).reason == "HTTP 301: redirects are not followed; give the final URL"
    assert judge(399).reason.startswith("HTTP 399: redirects")
    assert judge(400).reason == "HTTP 400: the receiver refuses this page"
    assert judge(404).reason == "HTTP 404: the receiver refuses this page"
    assert judge(499).verdict == "give_up"  # a client error however close to 500
    assert judge(503).reason == "HTTP 503"


def test_one_lane_has_one_sender_at_a_time(receiver: Receiver) -> None:
    """A second worker on a busy lane sends nothing: the lane's order and its single sender are kept."""
    outbox, clock = Outbox(), Clock(T)
    receiver.delay_s = 0.5
    outbox.enqueue(project="p", receiver=receiver.url, trusted=True, payload=page(), now=T)
    dispatcher = Dispatcher(outbox, clock=clock)
    first = threading.Thread(target=dispatcher.deliver_lane, args=(("p", receiver.url),))
    first.start()
    # the first worker holds the lane once its post has reached the receiver (a fixed sleep
    # of 0.2 s let the second worker go first when a loaded machine started the thread late)
    deadline = time.monotonic() + 10
    while not receiver.posts and time.monotonic() < deadline:
        time.sleep(0.005)
    assert dispatcher.deliver_lane(("p", receiver.url)) == 0
    first.join()
    assert len(receiver.posts) == 1


def test_a_page_given_up_for_age_lets_the_lanes_next_page_go_and_says_so(
    receiver: Receiver, caplog: pytest.LogCaptureFixture,
) -> None:
    outbox, clock = Outbox(), Clock(T + GIVE_UP_AFTER_S)
    receiver.fail_next = [503]
    outbox.enqueue(project="p", receiver=receiver.url, trusted=True, payload=page(key="old"), now=T)
    outbox.enqueue(project="p", receiver=receiver.url, trusted=True, payload=page(key="new"), now=clock.now)
    with caplog.at_level(logging.ERROR, logger="retrylens.alerts"):
        assert Dispatcher(outbox, clock=clock).run_once() == 1
    assert [r["dedup_key"] for r in receiver.received] == ["new"]
    assert "failed (try 1): HTTP 503; given up" in caplog.text


def test_a_failed_try_is_logged_with_its_number_and_what_comes_next(caplog: pytest.LogCaptureFixture) -> None:
    outbox, clock = Outbox(), Clock(T)
    outbox.enqueue(project="p", receiver="http://127.0.0.1:9/down", trusted=True, payload=page(), now=T)
    dispatcher = Dispatcher(outbox, clock=clock)
    with caplog.at_level(logging.ERROR, logger="retrylens.alerts"):
        dispatcher.run_once()
        clock.advance(5)
        dispatcher.run_once()
    assert "failed (try 1): ConnectError" in caplog.text and "failed (try 2): ConnectError" in caplog.text
    assert caplog.text.count("will retry") == 2


def test_a_redirect_is_never_followed_so_a_receiver_cannot_bounce_the_page_inward(receiver: Receiver) -> None:
    inside = Receiver().start()
    try:
        receiver.fail_next, receiver.location = [307], inside.url
        outbox = Outbox()
        outbox.enqueue(project="p", receiver=receiver.url, trusted=True, payload=page(), now=T)
        Dispatcher(outbox, clock=Clock(T)).run_once()
        assert inside.posts == []
        (delivery,) = outbox.deliveries()
        assert (delivery.state, delivery.last_error) == (
            "gave_up", "HTTP 307: redirects are not followed; give the final URL")
    finally:
        inside.stop()
