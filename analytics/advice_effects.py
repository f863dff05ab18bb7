"""What each advice kind really did, measured on stored pre-checks, and which kinds to retire.

A kind of advice can only be judged against tasks that were eligible for it and did not
get it. So the API withholds the advice it would give from a fixed share of tasks (the
``advice_holdout_share`` setting, chosen by a hash of the task id, so a re-run of the same
tasks withholds from the same ones); each stored pre-check says, in its explanation, which
kinds were ``given`` and which were ``withheld``. Joined to how the tasks ended
(:func:`~.prechecks.joined_prechecks`), the difference given − withheld of the success
rate, the cost per task and the hand-off rate, with 95 % CIs (Newcombe's for the two rates,
which hold on small arms that all ended alike; Welch's normal one for cost), is the kind's
measured effect: a randomised comparison, not a before/after.

A kind is **retired** — no longer given; the pre-check answer says so with these figures
— when, with at least :data:`MIN_ARM` judged tasks on each side, it clearly lowers success
(the CI's upper bound below zero), or clearly raises cost or hand-offs without clearly
raising success (that CI's lower bound above zero while success's lower bound is not), or
raises cost by more than the successes it adds are worth: the cost CI's lower bound above
the success CI's upper bound times the price of a success where it was withheld (that
arm's spend per succeeded task) — the rule the advice book applies before giving a kind.
Human review is judged like the rest: a hand-off that saved nothing shows as lost success.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from retrylens.store import EventStore

from .prechecks import joined_prechecks

MIN_ARM = 10
Z95 = 1.96
METRICS = ("success", "cost_usd", "handoff")


def statuses(explanation: dict[str, Any] | None) -> dict[str, str]:
    """``kind → given | withheld | retired`` from a stored pre-check's explanation."""
    out: dict[str, str] = {}
    for entry in (explanation or {}).get("advice") or []:
        if isinstance(entry, dict) and entry.get("advice"):
            out[str(entry["advice"])] = str(entry.get("status") or "given")
    return out


def _diff(a: list[float], b: list[float]) -> dict[str, float | None]:
    """Mean of ``a`` − mean of ``b`` with a normal 95 % CI (Welch's standard error)."""
    if not a or not b:
        return {"value": None, "lo": None, "hi": None}
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / max(1, len(a) - 1)
    vb = sum((x - mb) ** 2 for x in b) / max(1, len(b) - 1)
    se = math.sqrt(va / len(a) + vb / len(b))
    return {"value": ma - mb, "lo": ma - mb - Z95 * se, "hi": ma - mb + Z95 * se}


def _wilson(successes: float, n: int) -> tuple[float, float]:
    """Wilson's 95 % score interval of a rate: it keeps its width at 0 % and 100 %."""
    p = successes / n
    scale = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / scale
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / scale
    return max(0.0, centre - half), min(1.0, centre + half)


def _diff_rates(a: list[float], b: list[float]) -> dict[str, float | None]:
    """Rate of ``a`` − rate of ``b`` (yes/no outcomes) with Newcombe's 95 % CI.

    A normal interval has no width from an arm whose tasks all ended alike, so a small
    holdout that all succeeded would "prove" any given arm worse; Newcombe's hybrid score
    interval, built from each arm's Wilson interval, does not.
    """
    if not a or not b:
        return {"value": None, "lo": None, "hi": None}
    pa, pb = sum(a) / len(a), sum(b) / len(b)
    (la, ua), (lb, ub) = _wilson(sum(a), len(a)), _wilson(sum(b), len(b))
    d = pa - pb
    return {
        "value": d,
        "lo": d - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2),
        "hi": d + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2),
    }


def verdict(effect: dict[str, Any]) -> tuple[str, str]:
    """``(helps | hurts | unclear | too few, words)`` for one kind's measured effect."""
    n_given, n_withheld = effect["given"], effect["withheld"]
    if n_given < MIN_ARM or n_withheld < MIN_ARM:
        return "too few", (
            f"{n_given} judged task(s) given it, {n_withheld} withheld; {MIN_ARM} of each needed "
            "to judge it"
        )
    s, c, h = effect["success"], effect["cost_usd"], effect["handoff"]
    words = (
        f"given to {n_given} tasks vs withheld from {n_withheld}: success {s['value']:+.1%} "
        f"[{s['lo']:+.1%}, {s['hi']:+.1%}], cost per task {c['value']:+.5f} USD [{c['lo']:+.5f}, {c['hi']:+.5f}], "
        f"hand-offs {h['value']:+.1%} [{h['lo']:+.1%}, {h['hi']:+.1%}] (95 % CIs)"
    )
    if s["hi"] < 0:
        return "hurts", f"it lowers success: {words}"
    if s["lo"] <= 0 and (c["lo"] > 0 or h["lo"] > 0):
        what = "cost" if c["lo"] > 0 else "hand-offs"
        return "hurts", f"it raises {what} without clearly raising success: {words}"
    price = effect.get("price_of_success")
    if price is not None and c["lo"] > 0 and c["lo"] > s["hi"] * price:
        return "hurts", (
            f"it raises cost by more than the successes it adds are worth (at most {s['hi']:+.1%} x "
            f"{price:.5f} USD a success where withheld): {words}"
        )
    if s["lo"] > 0 or c["hi"] < 0 or h["hi"] < 0:
        return "helps", words
    return "unclear", words


def measure(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per advice kind: tasks given / withheld, the differences with CIs, the verdict in words."""
    arms: dict[str, dict[str, dict[str, list[float]]]] = {}
    for r in rows:
        if r.get("failed") is None:  # no outcome yet: not judged
            continue
        figures = {
            "success": float(r["outcome"] == "succeeded"),
            "cost_usd": float(r.get("cost_usd") or 0.0),
            "handoff": float(r["outcome"] == "handed_off"),
        }
        for kind, status in statuses(r.get("explanation")).items():
            if status in ("given", "withheld"):
                arm = arms.setdefault(kind, {}).setdefault(status, {m: [] for m in METRICS})
                for m in METRICS:
                    arm[m].append(figures[m])
    out = []
    for kind in sorted(arms):
        given = arms[kind].get("given") or {m: [] for m in METRICS}
        withheld = arms[kind].get("withheld") or {m: [] for m in METRICS}
        effect: dict[str, Any] = {
            "advice": kind,
            "given": len(given["success"]),
            "withheld": len(withheld["success"]),
        }
        for m in METRICS:
            diff = _diff if m == "cost_usd" else _diff_rates  # success, hand-off: yes/no
            effect[m] = diff(given[m], withheld[m])
        won = sum(withheld["success"])
        effect["price_of_success"] = sum(withheld["cost_usd"]) / won if won else None
        effect["verdict"], effect["words"] = verdict(effect)
        out.append(effect)
    return out


def advice_effects(
    store: EventStore,
    *,
    project: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> list[dict[str, Any]]:
    """:func:`measure` over the stored pre-checks of ``project`` (every project when ``None``)."""
    return measure(joined_prechecks(store, project=project, start=start, end=end))


def retired(effects: Iterable[dict[str, Any]]) -> dict[str, str]:
    """``kind → why`` for the kinds whose measured effect does not help."""
    return {e["advice"]: e["words"] for e in effects if e["verdict"] == "hurts"}
