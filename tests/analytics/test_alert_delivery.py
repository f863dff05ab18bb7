"""Alert pages are delivered as an alert manager delivers them: queued on disk, retried until a
2xx, one page per incident key, resolved when the rule goes, one project never waiting for another.

Every receiver here is a real local HTTP server (down, flaky, slow) or a black hole; the
dispatcher runs in virtual time where the schedule matters and in real threads where
isolation does.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alert_receiver import BlackHole, Clock, Receiver
from analytics_eventset import T0, T1, load

from retrylens.analytics.alert_delivery import Dispatcher
from retrylens.analytics.alert_outbox import GIVE_UP_AFTER_S, Outbox
from retrylens.analytics.alerts import AlertRule, delete_rule, evaluate_alerts, save_rule
from retrylens.analytics.filters import Slice

pytestmark = pytest.mark.clickhouse
LOCAL = ("127.0.0.1:*",)  # the receivers listen on loopback: allowed as an operator allows a relay
DURING = T0 + timedelta(minutes=55)  # planner's retry rate in the last hour: 0.5
AFTER = T1 + timedelta(hours=3)  # no planner calls left in the window


def planner_rule(url: str = "", **changes: object) -> AlertRule:
    rule = AlertRule(name="planner retries", metric="retry_rate", op=">", threshold=0.3, window_minutes=60,
                     where=Slice(project="alpha"), per="agent", webhook_url=url)
    return replace(rule, **changes)


@pytest.fixture
def receiver():
    made = Receiver()
    yield made
    made.stop()


def _dispatcher(outbox: Outbox, clock: Clock, *, timeout_s: float = 2.0) -> Dispatcher:
    return Dispatcher(outbox, allowed_hosts=LOCAL, timeout_s=timeout_s, clock=clock)


def test_a_page_sent_while_the_receiver_is_down_arrives_when_it_is_back_even_after_a_restart(
    store, receiver: Receiver, tmp_path: Path,
) -> None:
    load(store)
    save_rule(store, planner_rule(receiver.url))
    path, clock = tmp_path / "outbox.sqlite3", Clock(DURING.timestamp())
    outbox = Outbox(path, clock=clock)
    fired = evaluate_alerts(store, now=DURING, outbox=outbox)
    assert [n.status for n in fired] == ["firing"]
    assert _dispatcher(outbox, clock).run_once() == 0  # the receiver is down: connection refused
    outbox.close()  # the server stops; the page must survive it

    outbox = Outbox(path, clock=clock)
    dispatcher = _dispatcher(outbox, clock)
    clock.advance(30)
    assert dispatcher.run_once() == 0  # still down
    receiver.start()
    clock.advance(30)  # a minute after the firing
    assert dispatcher.run_once() == 1
    assert evaluate_alerts(store, now=DURING + timedelta(minutes=1), outbox=outbox) == []  # still firing: silent
    clock.advance(60)
    assert dispatcher.run_once() == 0
    evaluate_alerts(store, now=AFTER, outbox=outbox)
    clock.now = AFTER.timestamp()
    assert dispatcher.run_once() == 1
    key = fired[0].payload()["dedup_key"]
    assert [(r["status"], r["dedup_key"]) for r in receiver.received] == [("firing", key), ("resolved", key)]
    assert [h["Idempotency-Key"] for h in receiver.headers] == [key, key]


def test_a_refiring_whose_state_was_lost_pages_no_second_time(store, receiver: Receiver) -> None:
    """The process died after queueing the page and before storing the state: the next
    evaluation fires again, and the open incident in the outbox keeps it one page."""
    receiver.start()
    load(store)
    save_rule(store, planner_rule(receiver.url))
    clock = Clock(DURING.timestamp())
    outbox = Outbox(clock=clock)
    first = evaluate_alerts(store, now=DURING, outbox=outbox)
    store.client.command(f"TRUNCATE TABLE {store.database}.alert_state")
    again = evaluate_alerts(store, now=DURING + timedelta(minutes=1), outbox=outbox)
    assert [n.status for n in again] == ["firing"]  # the evaluation cannot tell: it fires again
    assert again[0].payload()["dedup_key"] == first[0].payload()["dedup_key"]
    clock.advance(120)
    _dispatcher(outbox, clock).run_once()
    assert [r["status"] for r in receiver.received] == ["firing"]


def test_a_flaky_receiver_is_retried_with_backoff_and_its_retry_after_until_it_acknowledges(
    store, receiver: Receiver,
) -> None:
    receiver.start()
    receiver.fail_next, receiver.retry_after = [503, 429], "60"
    load(store)
    save_rule(store, planner_rule(receiver.url))
    clock = Clock(DURING.timestamp())
    outbox = Outbox(clock=clock)
    evaluate_alerts(store, now=DURING, outbox=outbox)
    dispatcher = _dispatcher(outbox, clock)
    tries = []
    for step in (0, 30, 30, 30, 30):  # t = 0, 30, 60, 90, 120 s
        clock.advance(step)
        dispatcher.run_once()
        tries.append(len(receiver.posts))
    # 503 at 0 s (Retry-After 60: next at 60), 429 at 60 s (Retry-After 60: next at 120), 2xx at 120 s
    assert tries == [1, 1, 2, 2, 3]
    assert [r["status"] for r in receiver.received] == ["firing"]
    (delivery,) = outbox.deliveries()
    assert (delivery.state, delivery.attempts) == ("delivered", 3)


def test_without_retry_after_the_backoff_doubles(store, receiver: Receiver) -> None:
    receiver.start()
    receiver.fail_next = [500, 500, 500]
    load(store)
    save_rule(store, planner_rule(receiver.url))
    clock = Clock(DURING.timestamp())
    outbox = Outbox(clock=clock)
    evaluate_alerts(store, now=DURING, outbox=outbox)
    dispatcher, start, tried_at = _dispatcher(outbox, clock), clock.now, []
    while len(receiver.received) < 1 and clock.now - start < 100:
        before = len(receiver.posts)
        dispatcher.run_once()
        if len(receiver.posts) > before:
            tried_at.append(round(clock.now - start))
        clock.advance(1)
    assert tried_at == [0, 5, 15, 35]  # waits of 5, 10, 20 s


def test_a_refused_page_is_given_up_at_once_and_a_silent_receiver_after_a_day(
    store, receiver: Receiver, caplog: pytest.LogCaptureFixture,
) -> None:
    receiver.start()
    receiver.fail_next = [400]
    load(store)
    save_rule(store, planner_rule(receiver.url))
    save_rule(store, planner_rule("http://127.0.0.1:9/down", name="to nowhere"))
    clock = Clock(DURING.timestamp())
    outbox = Outbox(clock=clock)
    evaluate_alerts(store, now=DURING, outbox=outbox)
    dispatcher = _dispatcher(outbox, clock)
    with caplog.at_level(logging.ERROR, logger="retrylens.alerts"):
        dispatcher.run_once()
        clock.advance(GIVE_UP_AFTER_S - 1)
        dispatcher.run_once()
        assert {d.receiver: d.state for d in outbox.deliveries()}["http://127.0.0.1:9/down"] == "pending"
        clock.advance(60)  # past a day, at its next try
        dispatcher.run_once()
    states = {d.receiver: (d.state, d.last_error) for d in outbox.deliveries()}
    assert states[receiver.url] == ("gave_up", "HTTP 400: the receiver refuses this page")
    assert states["http://127.0.0.1:9/down"][0] == "gave_up"
    assert "not acknowledged within 24 h" in states["http://127.0.0.1:9/down"][1]
    assert len(receiver.posts) == 1 and "given up" in caplog.text


def test_a_slow_receiver_is_retried_under_the_same_key(store, receiver: Receiver) -> None:
    """An answer later than the timeout counts as not delivered; the retry carries the same key,
    so a receiver that deduplicates (as PagerDuty does) opens one incident."""
    receiver.start()
    receiver.delay_s = 1.0
    load(store)
    save_rule(store, planner_rule(receiver.url))
    clock = Clock(DURING.timestamp())
    outbox = Outbox(clock=clock)
    evaluate_alerts(store, now=DURING, outbox=outbox)
    dispatcher = _dispatcher(outbox, clock, timeout_s=0.3)
    assert dispatcher.run_once() == 0
    receiver.delay_s = 0.0
    clock.advance(5)
    assert dispatcher.run_once() == 1
    time.sleep(0.8)  # the first post's late answer
    assert len(receiver.posts) == 2 and len({p["dedup_key"] for p in receiver.posts}) == 1


def test_deleting_or_disabling_a_firing_rule_sends_its_resolution(store, receiver: Receiver) -> None:
    receiver.start()
    load(store)
    deleted = save_rule(store, planner_rule(receiver.url, name="deleted later"))
    disabled = save_rule(store, planner_rule(receiver.url, name="disabled later"))
    clock = Clock(DURING.timestamp())
    outbox = Outbox(clock=clock)
    evaluate_alerts(store, now=DURING, outbox=outbox)
    delete_rule(store, deleted)
    save_rule(store, replace(disabled, enabled=False))
    resolved = evaluate_alerts(store, now=DURING + timedelta(minutes=1), outbox=outbox)
    assert sorted((n.rule_name, n.payload()["reason"]) for n in resolved) == [
        ("deleted later", "rule_deleted"), ("disabled later", "rule_disabled")]
    clock.advance(120)
    _dispatcher(outbox, clock).run_once()
    pages = {(r["rule_name"], r["status"]): r for r in receiver.received}
    assert set(pages) == {("deleted later", "firing"), ("deleted later", "resolved"),
                          ("disabled later", "firing"), ("disabled later", "resolved")}
    assert pages["deleted later", "resolved"]["dedup_key"] == pages["deleted later", "firing"]["dedup_key"]
    assert "the rule was deleted while firing" in pages["deleted later", "resolved"]["summary"]
    assert evaluate_alerts(store, now=DURING + timedelta(minutes=2), outbox=outbox) == []  # resolved once


def test_a_rule_with_its_own_webhook_does_not_also_page_the_default_one(store) -> None:
    own, default = Receiver().start(), Receiver().start()
    try:
        load(store)
        save_rule(store, planner_rule(own.url, name="own hook"))
        save_rule(store, planner_rule(name="default hook"))
        clock = Clock(DURING.timestamp())
        outbox = Outbox(clock=clock)
        evaluate_alerts(store, now=DURING, outbox=outbox, webhook_url=default.url)
        _dispatcher(outbox, clock).run_once()
        assert [r["rule_name"] for r in own.received] == ["own hook"]
        assert [r["rule_name"] for r in default.received] == ["default hook"]
    finally:
        own.stop()
        default.stop()


def test_a_projects_black_hole_receivers_never_delay_another_projects_page(store) -> None:
    """Twenty of alpha's rules post to a receiver that never answers; beta's page arrives at once."""
    hole, beta = BlackHole(), Receiver().start()
    try:
        load(store)
        for n in range(20):
            save_rule(store, AlertRule(name=f"alpha {n:02d}", metric="calls", op=">", threshold=0,
                                       window_minutes=3 * 24 * 60, where=Slice(project="alpha"), webhook_url=hole.url))
        save_rule(store, AlertRule(name="beta calls", metric="calls", op=">", threshold=0, window_minutes=3 * 24 * 60,
                                   where=Slice(project="beta"), webhook_url=beta.url))
        outbox = Outbox()
        dispatcher = Dispatcher(outbox, allowed_hosts=LOCAL, timeout_s=3.0)
        began = time.monotonic()
        stop = dispatcher.start(poll_s=0.05)
        fired = evaluate_alerts(store, now=AFTER, outbox=outbox, on_enqueue=dispatcher.wake)
        evaluated = time.monotonic() - began
        while not beta.received and time.monotonic() - began < 10:
            time.sleep(0.01)
        arrived = time.monotonic() - began
        stop()
        assert len(fired) == 21 and [r["rule_name"] for r in beta.received] == ["beta calls"]
        # behind even one of alpha's posts, beta's page would wait its 3 s timeout: 2 s tells
        # that apart and leaves a loaded machine room to deliver (the bound stood at 1 s)
        assert arrived - evaluated < 2.0, f"beta's page waited {arrived - evaluated:.2f} s behind alpha's receiver"
        assert all(d.state == "pending" for d in outbox.deliveries(project="alpha"))
    finally:
        hole.close()
        beta.stop()


def test_a_receivers_credentials_never_reach_the_log(store, caplog: pytest.LogCaptureFixture) -> None:
    load(store)
    save_rule(store, planner_rule("http://pager:s3cret-pw@127.0.0.1:9/hook?token=t0ken-value&team=ops"))
    clock = Clock(DURING.timestamp())
    outbox = Outbox(clock=clock)
    with caplog.at_level(logging.DEBUG, logger="retrylens"):
        evaluate_alerts(store, now=DURING, outbox=outbox)
        _dispatcher(outbox, clock).run_once()
    assert "alert webhook" in caplog.text and "127.0.0.1:9/hook" in caplog.text
    assert "s3cret-pw" not in caplog.text and "t0ken-value" not in caplog.text and "pager" not in caplog.text


def test_a_page_from_an_evaluation_at_a_past_time_is_aged_from_its_enqueueing(store) -> None:
    """An evaluation run for a time long past (a replay, a catch-up) queues its page now: the
    outbox ages it from then, so its first failed try schedules a retry instead of giving it up
    as a day old; the page still says when the rule was evaluated."""
    down = Receiver()  # never started: connection refused
    evaluated_at = datetime.now(UTC) - timedelta(days=30)
    save_rule(store, AlertRule(name="no calls", metric="calls", op="<", threshold=1, window_minutes=60,
                               where=Slice(project="alpha"), webhook_url=down.url))
    outbox = Outbox()
    (fired,) = evaluate_alerts(store, now=evaluated_at, outbox=outbox)
    assert fired.status == "firing"
    before = time.time()
    assert Dispatcher(outbox, allowed_hosts=LOCAL, timeout_s=2.0).run_once() == 0
    (delivery,) = outbox.deliveries()
    assert (delivery.state, delivery.attempts) == ("pending", 1), delivery.last_error
    assert before - 60 < delivery.created_at <= time.time()
    assert delivery.payload["at"] == evaluated_at.isoformat()
