"""Ingest status figures exactly, at their boundaries (no store, no broker; a fake clock).

``retrylens consume --stats`` and the API show these figures and the "keeping up" verdict an
operator acts on. The chain tests check that ingest reports through them; these pin each
figure (mutation target ``ingest_status``): the window's edge, throughput over the time since
start or the window, the lag limit and its floor of one message, and a group's sums.
"""

from __future__ import annotations

from collections.abc import Callable

from retrylens.ingest.status import IngestStatus, combine_snapshots

EMPTY = {"messages": 0, "rows": 0, "eps": 0.0, "lag": None, "lag_trend": 0, "batches_in_window": 0,
         "mean_batch_rows": 0, "last_insert_ms": None, "keeping_up": True}


def _status(start: float = 100.0) -> tuple[IngestStatus, Callable[[float], None]]:
    """A status whose clock starts at ``start`` (not 0: the time since start must be a difference)."""
    now = [start]

    def at(t: float) -> None:
        now[0] = t

    return IngestStatus(window_s=30, keep_up_seconds=5, clock=lambda: now[0]), at


def test_nothing_read_yet_is_keeping_up_with_no_figures() -> None:
    status, _ = _status()
    assert status.snapshot() == EMPTY


def _two_batches() -> IngestStatus:
    """A status with 300 then 500 messages read, at 110 and 120 s (the lag halving)."""
    status, at = _status()
    at(110)
    status.record(messages=300, rows=200, lag=100, insert_s=0.0125)
    at(120)
    status.record(messages=500, rows=301, lag=50, insert_s=0.02)
    return status


def test_each_figure_of_a_snapshot() -> None:
    status = _two_batches()
    # 800 messages over the 20 s since start (less than the window), the lag halving
    assert status.snapshot() == {"messages": 800, "rows": 501, "eps": 40.0, "lag": 50, "lag_trend": -50,
                                 "batches_in_window": 2, "mean_batch_rows": 250.5, "last_insert_ms": 20.0,
                                 "keeping_up": True}


def test_a_commit_exactly_one_window_old_still_counts_and_then_leaves() -> None:
    status, at = _status()
    at(110)
    status.record(messages=60, rows=60, lag=0, insert_s=0.001)
    at(140)  # the first commit is exactly 30 s old: still in the window, here and in record()
    status.record(messages=60, rows=60, lag=300, insert_s=0.001)
    inside = status.snapshot()
    assert (inside["batches_in_window"], inside["eps"], inside["lag_trend"], inside["keeping_up"]) == (2, 4.0, 300, False)
    at(140.5)
    outside = status.snapshot()
    assert (outside["batches_in_window"], outside["eps"], outside["lag_trend"]) == (1, 2.0, 0)
    assert (outside["messages"], outside["rows"]) == (120, 120)  # totals keep what left the window
    status.record(messages=1, rows=1, lag=300, insert_s=0.001)
    assert status.snapshot()["batches_in_window"] == 2


def _verdict(*, messages: int, lag: int, then_lag: int | None = None) -> bool:
    status, at = _status()
    at(110)
    status.record(messages=messages, rows=messages, lag=lag, insert_s=0.001)
    if then_lag is not None:
        status.record(messages=0, rows=0, lag=then_lag, insert_s=0.001)
    at(120)
    return bool(status.snapshot()["keeping_up"])


def test_keeping_up_is_a_lag_within_five_seconds_of_throughput_or_a_shrinking_one() -> None:
    # 100 messages over 20 s: 5 a second, so 25 messages behind is five seconds of reading
    assert _verdict(messages=100, lag=25) is True
    assert _verdict(messages=100, lag=26) is False
    assert _verdict(messages=100, lag=30, then_lag=26) is True  # shrinking
    assert _verdict(messages=100, lag=27, then_lag=26) is True  # shrinking by one message is shrinking
    assert _verdict(messages=100, lag=26, then_lag=26) is False  # standing still is not shrinking
    # nothing read: one message behind is the floor, two are falling behind
    assert _verdict(messages=0, lag=1) is True
    assert _verdict(messages=0, lag=2) is False


def test_a_group_adds_its_members_up_and_skips_what_a_member_has_not_got() -> None:
    busy = _two_batches()
    idle, _ = _status()
    one, _ = _status()
    one.record(messages=60, rows=60, lag=7, insert_s=0.5)  # at 100: 60 messages over 1e-9 s
    snapshots = [idle.snapshot(), busy.snapshot(), one.snapshot()]
    group = combine_snapshots(snapshots)
    assert group == {"messages": 860, "rows": 561, "eps": round(40.0 + 60 / 1e-9, 1), "lag": 57, "lag_trend": -50,
                     "batches_in_window": 3, "mean_batch_rows": 187.0, "last_insert_ms": 500.0,
                     "keeping_up": True, "members": snapshots}
    assert combine_snapshots([idle.snapshot(), idle.snapshot()]) == {**EMPTY, "members": [EMPTY, EMPTY]}
    assert combine_snapshots([]) == {**EMPTY, "members": []}


def _three_commits() -> IngestStatus:
    status, at = _status()
    for t, messages, rows, lag, insert_s in ((110, 100, 100, 10, 0.0123456), (120, 300, 101, 20, 0.0456789),
                                             (130, 400, 301, 5, 0.001234)):
        at(t)
        status.record(messages=messages, rows=rows, lag=lag, insert_s=insert_s)
    return status


def test_figures_are_rounded_to_one_decimal_and_the_trend_runs_from_the_first_commit_to_the_last() -> None:
    # 800 messages over 30 s; 502 rows in 3 batches; the last insert took 1.234 ms; lag 10 -> 20 -> 5
    assert _three_commits().snapshot() == {"messages": 800, "rows": 502, "eps": 26.7, "lag": 5, "lag_trend": -5,
                                           "batches_in_window": 3, "mean_batch_rows": 167.3, "last_insert_ms": 1.2,
                                           "keeping_up": True}


def test_a_member_whose_batches_held_no_valid_row_weighs_in_the_groups_mean() -> None:
    invalid_only, at = _status()
    at(110)
    invalid_only.record(messages=4, rows=0, lag=0, insert_s=0.002)  # a batch of dead letters only
    at(120)
    group = combine_snapshots([_three_commits().snapshot(), invalid_only.snapshot()])
    # eps 26.7 + 0.2; rows in the window 167.3 * 3 + 0 * 1 over 4 batches
    assert (group["eps"], group["mean_batch_rows"], group["batches_in_window"]) == (26.9, 125.5, 4)
    assert (group["lag"], group["lag_trend"], group["last_insert_ms"]) == (5, -5, 2.0)


def test_a_long_running_status_keeps_only_its_windows_commits() -> None:
    """A consumer runs for weeks: the commits it keeps are the last window's, not all of them."""
    status, at = _status()
    for second in range(1, 1_001):
        at(100 + second)
        status.record(messages=1, rows=1, lag=0, insert_s=0.001)
    assert len(status._commits) == 31  # the commits of the last 30 s, both ends included
    assert status.snapshot()["batches_in_window"] == 31 and status.snapshot()["messages"] == 1_000
