"""Posting the outbox's pages: retried until a 2xx, one lane never waiting for another.

The evaluation loop only enqueues into :class:`~.alert_outbox.Outbox`; a :class:`Dispatcher`
posts. Each *lane* — one project's pages to one receiver — is sent in order by a worker
thread of its own, each post bounded by ``timeout_s``: a receiver that is down, slow or a
black hole delays only its own lane, never another project's (Alertmanager runs one
notification pipeline per receiver for the same reason).

What each answer means (PagerDuty Events v2's contract, which receivers follow):

* 2xx — acknowledged: delivered, never sent again;
* a connection error, a timeout, 408, 425, 429 or 5xx — the receiver may take it later:
  retried with backoff (``Retry-After`` honoured), up to :data:`~.alert_outbox.GIVE_UP_AFTER_S`;
* any other answer (a 4xx, a redirect, which is never followed) — the receiver refuses this
  page and would refuse it again: given up at once, with the reason logged and kept.

A rule's own webhook is checked again before every post (:mod:`.webhook_targets`): a name
may resolve inward by now. Receivers' credentials (``user:pw@``, query values) never reach
the log: :func:`safe_url` is what is written.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import parse_qsl, quote_plus, urlsplit, urlunsplit

import httpx

from .alert_outbox import Delivery, Outbox, State
from .webhook_targets import webhook_refusal

log = logging.getLogger("retrylens.alerts")
_RETRYABLE = frozenset({408, 425, 429})
Verdict = Literal["delivered", "retry", "give_up"]


@dataclass(frozen=True)
class Outcome:
    """What one post came to, and why (``retry_after_s``: the receiver's own ``Retry-After``)."""

    verdict: Verdict
    reason: str = ""
    retry_after_s: float | None = None


def safe_url(url: str) -> str:
    """``url`` fit for a log line: no user or password, every query value masked, and the path
    after its first segment masked (Slack's and Teams' webhook URLs carry their secret there)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = ("***@" if parts.username or parts.password else "") + host + (f":{parts.port}" if parts.port else "")
    # "***" as it is: urlencode would show it as %2A%2A%2A
    query = "&".join(f"{quote_plus(name)}=***" for name, _ in parse_qsl(parts.query, keep_blank_values=True))
    first, *rest = parts.path.lstrip("/").split("/", 1)
    path = f"/{first}" + ("/***" if rest and rest[0] else "") if parts.path else ""
    return urlunsplit((parts.scheme, netloc, path, query, ""))


def judge(status: int, retry_after: str | None = None) -> Outcome:
    """The outcome of an HTTP answer ``status`` (the contract in the module doc)."""
    if 200 <= status < 300:
        return Outcome("delivered")
    if status in _RETRYABLE or status >= 500:
        seconds = float(retry_after) if retry_after and retry_after.strip().isdigit() else None
        return Outcome("retry", f"HTTP {status}", seconds)
    if 300 <= status < 400:
        return Outcome("give_up", f"HTTP {status}: redirects are not followed; give the final URL")
    return Outcome("give_up", f"HTTP {status}: the receiver refuses this page")


def post_page(url: str, delivery: Delivery, *, timeout_s: float) -> Outcome:
    """POST the page once; never raises (every failure is an :class:`Outcome`)."""
    headers = {"Idempotency-Key": delivery.dedup_key, "X-RetryLens-Dedup-Key": delivery.dedup_key}
    try:
        response = httpx.post(url, json=delivery.payload, headers=headers, timeout=timeout_s, follow_redirects=False)
    except httpx.TimeoutException:
        return Outcome("retry", f"no answer within {timeout_s:g} s")
    except httpx.HTTPError as exc:
        return Outcome("retry", f"{type(exc).__name__}: {exc}".replace(url, safe_url(url)))
    return judge(response.status_code, response.headers.get("retry-after"))


class Dispatcher:
    """Sends due deliveries, lane by lane (see the module doc).

    ``clock`` gives epoch seconds, by default the outbox's (the one its pages were queued and
    aged by; tests pass a virtual one); :meth:`run_once` sends what is
    due now in the caller's thread, :meth:`start` keeps sending from worker threads.
    """

    def __init__(self, outbox: Outbox, *, allowed_hosts: Iterable[str] = (), timeout_s: float = 5.0,
                 clock: Callable[[], float] | None = None,
                 post: Callable[..., Outcome] = post_page) -> None:
        self.outbox = outbox
        self.allowed_hosts = tuple(allowed_hosts)
        self.timeout_s = timeout_s
        self.clock = outbox.clock if clock is None else clock
        self._post = post
        self._busy: set[tuple[str, str]] = set()
        self._busy_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()

    def deliver_lane(self, lane: tuple[str, str]) -> int:
        """Send the lane's due deliveries in order until one is not acknowledged; returns how many were."""
        with self._busy_lock:
            if lane in self._busy:
                return 0  # another thread is on this lane: order and a single sender are kept
            self._busy.add(lane)
        try:
            sent = 0
            while not self._stop.is_set():
                delivery = self.outbox.head(lane, self.clock())
                state = "pending" if delivery is None else self._attempt(delivery)
                if state == "pending":
                    break  # nothing due, or the head waits for its retry: the lane keeps its order
                sent += state == "delivered"
            return sent
        finally:
            with self._busy_lock:
                self._busy.discard(lane)

    def _attempt(self, delivery: Delivery) -> State:
        """One try of ``delivery``; its state after it (``pending``: the lane waits for its retry)."""
        refusal = None if delivery.trusted else webhook_refusal(delivery.receiver, self.allowed_hosts)
        outcome = Outcome("give_up", refusal) if refusal else self._post(
            delivery.receiver, delivery, timeout_s=self.timeout_s)
        now = self.clock()
        where = f"alert webhook {safe_url(delivery.receiver)} ({delivery.status} of {delivery.payload.get('rule_name')!r})"
        if outcome.verdict == "delivered":
            self.outbox.record_success(delivery, now=now)
            if delivery.attempts:
                log.info("%s delivered after %d failed tries", where, delivery.attempts)
            return "delivered"
        if outcome.verdict == "give_up":
            self.outbox.record_give_up(delivery, outcome.reason, now=now)
            log.error("%s given up: %s", where, outcome.reason)
            return "gave_up"  # this page is done with; the lane's next one may still be taken
        state = self.outbox.record_failure(delivery, outcome.reason, now=now, retry_after_s=outcome.retry_after_s)
        log.error("%s failed (try %d): %s; %s", where, delivery.attempts + 1, outcome.reason,
                  "given up" if state == "gave_up" else "will retry")
        return state

    def run_once(self) -> int:
        """Send every due lane in this thread; returns the deliveries acknowledged."""
        return sum(self.deliver_lane(lane) for lane in self.outbox.due_lanes(self.clock()))

    def wake(self) -> None:
        """Look for due deliveries now rather than at the next poll (after an enqueue)."""
        self._wake.set()

    def start(self, *, poll_s: float = 1.0) -> Callable[[], None]:
        """Poll for due lanes and give each a worker thread; returns ``stop()``.

        ``stop()`` does not wait for a post in flight beyond ``timeout_s``: what is not
        acknowledged stays pending in the outbox for the next start.
        """

        workers: list[threading.Thread] = []

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    for lane in self.outbox.due_lanes(self.clock()):
                        with self._busy_lock:
                            busy = lane in self._busy
                        if not busy:
                            worker = threading.Thread(target=self.deliver_lane, args=(lane,), daemon=True,
                                                      name=f"retrylens-alerts-{lane[0]}")
                            worker.start()
                            workers[:] = [w for w in workers if w.is_alive()] + [worker]
                except Exception:  # noqa: BLE001 - keep dispatching; the error is logged with its traceback
                    log.exception("alert dispatch failed")
                self._wake.wait(poll_s)
                self._wake.clear()

        thread = threading.Thread(target=loop, name="retrylens-alert-dispatch", daemon=True)
        thread.start()

        def stop() -> None:
            self._stop.set()
            self._wake.set()
            deadline = time.monotonic() + self.timeout_s + 1
            for running in [thread, *workers]:
                running.join(timeout=max(0.0, deadline - time.monotonic()))

        return stop


def annotate_history(history: list[dict[str, Any]], deliveries: list[Delivery]) -> list[dict[str, Any]]:
    """History rows with how their pages fared: ``delivery`` lists each receiver (credentials
    masked) with its state, tries and last error; ``delivered`` is true once every receiver
    acknowledged (a page with no receiver, the log only, is delivered when it is written)."""
    pages: dict[tuple[str, str, str, int], list[Delivery]] = {}
    for d in deliveries:
        at = _millis(datetime.fromisoformat(d.payload["at"]))
        pages.setdefault((d.rule_id, d.slice_value, d.status, at), []).append(d)
    out = []
    for row in history:
        mine = pages.get((row["rule_id"], row["slice_value"], row["status"], _millis(row["ts"])), [])
        shown = [{"receiver": safe_url(d.receiver), "state": d.state, "attempts": d.attempts,
                  "last_error": d.last_error, "dedup_key": d.dedup_key} for d in mine]
        delivered = all(d.state == "delivered" for d in mine) if mine else bool(row["delivered"])
        out.append({**row, "delivered": delivered, "delivery": shown})
    return out


def _millis(value: datetime) -> int:
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value
    return int(aware.timestamp() * 1000)
