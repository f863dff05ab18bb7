"""What one agent's history says about simplified retries, late recovery and each failure class,
with what those retries spent: the evidence :mod:`.advice` weighs (read from the advice book).

Kept apart from the book's SQL (:mod:`.advice_book`) and from the decision (:mod:`.advice`):
this module only counts and tests, with no store and no request.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MIN_RETRIES = 10
#: simplified retries a risk segment's record needs to judge simplified mode (see :meth:`AgentEvidence.degrade_helps`)
MIN_SEGMENT_RETRIES = 3
DEGRADE_AT = 0.2
#: an input is riskier than its agent's usual task from this many times the agent's failure rate
DEGRADE_RELATIVE = 1.5
#: ... and at least this risk: an agent that (almost) never failed has no usual failure to prevent
DEGRADE_FLOOR = 0.05
CAP_AT = 0.3
UNRECOVERABLE = 0.1
#: ``no_retry_of``: at least this many tasks retried after the class, and the 95 % upper bound of
#: their later success below a third (0 of 8 gives 32 %): at most one such retry in three could pay.
MIN_CLASS_TASKS = 8
CLASS_UNRECOVERABLE = 1 / 3
#: ... and at most this share of them recovered at all: a cap stops every such retry, so it loses
#: that share of successes on the tasks it bites; a pre-check that pays loses none it need not.
#: Why: on the planted scenario (seed 7) the high-risk tasks' retries after a validation failure
#: recovered 7 of 73 and 8 of 95 times (upper bounds 19 % and 16 %, under a third), and the cap
#: given for it cost 15 successes of 500 tasks (bench/RESULTS.md, issue 34).
CLASS_LOSS = 0.05
#: Failure classes a retry cap advice may lower: transient ones recover by waiting, and a
#: context overflow is answered by a smaller scope, not by a retry of the same attempt.
CAPPABLE = ("logic", "tool_error", "validation", "schema_mismatch", "unknown")
Z95 = 1.96
OUTPUT_FAILURES = ("schema_mismatch", "validation")
KINDS = ("human_review", "degrade_first", "no_retry_of", "lower_max_attempts")


Spend = tuple[float, float]
"""``(sum, sum of squares)`` of a spend in USD over tasks: enough for its mean and its 95 % CI."""


def _mean_ci(spend: Spend | None, n: int) -> tuple[float, float, float] | None:
    """Mean spend per task and its normal 95 % CI, or ``None`` when the history did not record it."""
    if spend is None or n < 2:
        return None
    total, squares = spend
    mean = total / n
    var = max(0.0, (squares - n * mean * mean) / (n - 1))
    half = Z95 * math.sqrt(var / n)
    return mean, mean - half, mean + half


@dataclass(frozen=True)
class AgentEvidence:
    """What one agent's history says about simplified retries and about recovering late, and
    what each of them spent: a cap pays only if the attempts it stops spent something."""

    relaxed_ok: int = 0
    relaxed_n: int = 0
    other_ok: int = 0
    other_n: int = 0
    #: attempts already failed → (tasks that reached that many failures, of which later succeeded)
    recovery: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: failure class → (tasks retried after a failure of that class, of which later succeeded)
    classes: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: what the attempts after each of those points spent (USD; what a cap there would save)
    recovery_spent: dict[int, Spend] = field(default_factory=dict)
    classes_spent: dict[str, Spend] = field(default_factory=dict)
    #: spend from a simplified / another retry after an output failure to the task's end
    relaxed_spent: Spend | None = None
    other_spent: Spend | None = None
    #: this agent's tasks, those that succeeded and what they all spent: the price of one success
    tasks: int = 0
    succeeded: int = 0
    spent: float = 0.0
    #: of those tasks, how many failed their first attempt with an output failure (``None``: a book
    #: written before this was recorded); what a simplified mode from the first attempt acts on
    first_failed: int | None = None

    @property
    def price_of_success(self) -> float | None:
        return self.spent / self.succeeded if self.succeeded else None

    def degrade_helps(
        self, own: AgentEvidence | None = None, whose: str = "this history's tasks", *,
        min_relaxed: int = MIN_RETRIES,
    ) -> tuple[bool, str]:
        """Simplified retries clearly succeeded more often, a simplified attempt fails less often
        than two plain attempts in a row, and what they cost to finish is paid: no more than other
        retries, or than the successes they added are worth at this agent's own price of a success
        (its spend per succeeded task).

        ``own``: the agent's own record (``whose`` names it), read for how often its plain tasks
        fail twice in a row when it holds :data:`MIN_RETRIES` plain retries; how well simplified
        attempts do may come from a wider history (``self``), how often this agent's tasks fail
        is its own. ``min_relaxed``: simplified retries needed (a risk segment's record holds few:
        the SDK simplifies only after a repeated failure; the difference's lower bound is
        Newcombe's, which keeps its width on a small arm that all ended alike)."""
        if self.relaxed_n < min_relaxed or self.other_n < MIN_RETRIES:
            return False, (
                f"too few retries after output failures to judge a simplified mode "
                f"({self.relaxed_n} simplified, {self.other_n} other; {min_relaxed} and {MIN_RETRIES} needed)"
            )
        a, b = self.relaxed_ok / self.relaxed_n, self.other_ok / self.other_n
        lo = _difference_lo(self.relaxed_ok, self.relaxed_n, self.other_ok, self.other_n)
        words = (
            f"after an output failure, a simplified retry succeeded {a:.0%} of {self.relaxed_n} times vs "
            f"{b:.0%} of {self.other_n} other retries (difference {a - b:+.0%}, 95 % lower bound {lo:+.0%})"
        )
        if lo <= 0:
            return False, words
        plain = (
            own
            if own is not None
            and own.tasks
            and own.first_failed is not None
            and own.other_n >= MIN_RETRIES
            else self
        )
        if plain.first_failed is None or not plain.tasks:
            return (
                False,
                words + "; how often first attempts fail was not recorded, so it is not given",
            )
        # Simplified from the first attempt, the loop breaker's one simplification is spent up front:
        # two simplified failures in a row stop the task where the plain run had a third attempt.
        first = plain.first_failed / plain.tasks
        again = 1 - plain.other_ok / plain.other_n
        words += (
            f"; a simplified attempt failed {1 - a:.0%} of the time vs {first * again:.0%} for two plain "
            f"attempts in a row on {whose if plain is own else 'this history'} ({first:.0%} of first "
            f"attempts failed on the output × {again:.0%} of their retries failed again)"
        )
        if 1 - a >= first * again:
            return False, words
        relaxed, other = (
            _mean_ci(self.relaxed_spent, self.relaxed_n),
            _mean_ci(self.other_spent, self.other_n),
        )
        price = self.price_of_success
        if relaxed is None or other is None or price is None:
            return False, words + "; what it costs was not recorded, so it is not given"
        extra, paid = relaxed[0] - other[0], lo * price
        words += (
            f"; to the task's end it spent {extra * 1e6:+,.0f} µUSD a retry vs other retries, "
            f"{'within' if extra <= paid else 'above'} what the added successes are worth "
            f"({lo:.0%} × {price * 1e6:,.0f} µUSD a success = {paid * 1e6:,.0f} µUSD)"
        )
        return extra <= paid, words

    def cap(self) -> tuple[int | None, str]:
        """The smallest cap after which this agent's tasks (almost) never recovered and the attempts
        it stops clearly spent something, with why."""
        for failed in sorted(self.recovery):
            reached, recovered = self.recovery[failed]
            if reached < MIN_RETRIES:
                continue
            rate = recovered / reached
            hi = _wilson_hi(recovered, reached)
            saved = _mean_ci(self.recovery_spent.get(failed), reached)
            if hi < UNRECOVERABLE and saved is not None and saved[1] > 0:
                return failed, (
                    f"of {reached} earlier tasks that failed {failed} time(s), {recovered} succeeded "
                    f"later ({rate:.0%}, 95 % upper bound {hi:.0%}); their later attempts spent "
                    f"{saved[0] * 1e6:,.0f} µUSD a task (95 % lower bound {saved[1] * 1e6:,.0f})"
                )
        return None, (
            "retries of this agent's failed tasks recover often enough, or spend too little, "
            "to lower its cap"
        )

    def class_caps(self, price: float | None = None) -> list[tuple[str, str]]:
        """The failure classes retries of this agent's tasks (almost) never recovered from (at most
        :data:`CLASS_LOSS` of them, 95 % upper bound under :data:`CLASS_UNRECOVERABLE`), where those
        retries clearly spent something (a retry that costs nothing saves nothing) and more than the
        successes they made are worth at ``price`` (the agent's spend per success; this record's own
        when not given), with why."""
        out = []
        price = self.price_of_success if price is None else price
        for cls in CAPPABLE:
            retried, recovered = self.classes.get(cls, (0, 0))
            if retried < MIN_CLASS_TASKS:
                continue
            hi = _wilson_hi(recovered, retried)
            saved = _mean_ci(self.classes_spent.get(cls), retried)
            lost = recovered / retried * (price or 0.0)
            if (hi < CLASS_UNRECOVERABLE and recovered <= CLASS_LOSS * retried and saved is not None
                    and saved[1] > lost):
                out.append(
                    (
                        cls,
                        f"of {retried} earlier tasks retried after a {cls} failure, {recovered} succeeded "
                        f"later ({recovered / retried:.0%}, 95 % upper bound {hi:.0%}); those retries "
                        f"spent {saved[0] * 1e6:,.0f} µUSD a task (95 % lower bound "
                        f"{saved[1] * 1e6:,.0f})",
                    )
                )
        return out

    def retries_fix(self, classes: list[str]) -> bool:
        """Whether this agent's retries after one of ``classes`` recovered too often to call an input
        that failed once with it lost: at least :data:`MIN_CLASS_TASKS` retried, and more than
        :data:`CLASS_LOSS` of them or a 95 % upper bound of their later success at or above
        :data:`CLASS_UNRECOVERABLE` recovered (the ``no_retry_of`` test, turned round: a hand-off
        stops every retry, as a cap does). A class with no such record says nothing either way."""
        for cls in classes:
            retried, recovered = self.classes.get(cls, (0, 0))
            if retried >= MIN_CLASS_TASKS and (recovered > CLASS_LOSS * retried
                                               or _wilson_hi(recovered, retried) >= CLASS_UNRECOVERABLE):
                return True
        return False

    def as_dict(self) -> dict[str, Any]:
        return {
            "relaxed_ok": self.relaxed_ok,
            "relaxed_n": self.relaxed_n,
            "other_ok": self.other_ok,
            "other_n": self.other_n,
            "recovery": {str(k): list(v) for k, v in self.recovery.items()},
            "classes": {k: list(v) for k, v in self.classes.items()},
            "recovery_spent": {str(k): list(v) for k, v in self.recovery_spent.items()},
            "classes_spent": {k: list(v) for k, v in self.classes_spent.items()},
            "relaxed_spent": None if self.relaxed_spent is None else list(self.relaxed_spent),
            "other_spent": None if self.other_spent is None else list(self.other_spent),
            "tasks": self.tasks,
            "succeeded": self.succeeded,
            "spent": self.spent,
            "first_failed": self.first_failed,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentEvidence:
        def spend(v: Any) -> Spend | None:
            return None if v is None else (float(v[0]), float(v[1]))

        return cls(
            int(data.get("relaxed_ok", 0)),
            int(data.get("relaxed_n", 0)),
            int(data.get("other_ok", 0)),
            int(data.get("other_n", 0)),
            {int(k): (int(v[0]), int(v[1])) for k, v in (data.get("recovery") or {}).items()},
            {str(k): (int(v[0]), int(v[1])) for k, v in (data.get("classes") or {}).items()},
            {
                int(k): (float(v[0]), float(v[1]))
                for k, v in (data.get("recovery_spent") or {}).items()
            },
            {
                str(k): (float(v[0]), float(v[1]))
                for k, v in (data.get("classes_spent") or {}).items()
            },
            spend(data.get("relaxed_spent")),
            spend(data.get("other_spent")),
            int(data.get("tasks", 0)),
            int(data.get("succeeded", 0)),
            float(data.get("spent", 0.0)),
            None if data.get("first_failed") is None else int(data["first_failed"]),
        )


def _wilson(k: int, n: int) -> tuple[float, float]:
    p = k / n
    centre = p + Z95**2 / (2 * n)
    spread = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + Z95**2 / n)), min(1.0, (centre + spread) / (1 + Z95**2 / n))


def _difference_lo(k1: int, n1: int, k2: int, n2: int) -> float:
    """Newcombe's 95 % lower bound of ``k1/n1 − k2/n2`` (from each rate's Wilson interval)."""
    p1, p2 = k1 / n1, k2 / n2
    lo1, _ = _wilson(k1, n1)
    _, hi2 = _wilson(k2, n2)
    return p1 - p2 - math.sqrt((p1 - lo1) ** 2 + (hi2 - p2) ** 2)


def _wilson_hi(k: int, n: int) -> float:
    if n == 0:
        return 1.0
    p = k / n
    centre = p + Z95**2 / (2 * n)
    spread = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n))
    return (centre + spread) / (1 + Z95**2 / n)



def _add(a: Spend | None, b: Spend | None) -> Spend | None:
    if a is None or b is None:
        return b if a is None else a
    return a[0] + b[0], a[1] + b[1]


def _sum(items: list[AgentEvidence]) -> AgentEvidence:
    recovery: dict[int, tuple[int, int]] = {}
    recovery_spent: dict[int, Spend] = {}
    relaxed_spent: Spend | None = None
    other_spent: Spend | None = None
    for e in items:
        for k, (reached, recovered) in e.recovery.items():
            a, b = recovery.get(k, (0, 0))
            recovery[k] = (a + reached, b + recovered)
        for k, spend in e.recovery_spent.items():
            recovery_spent[k] = _add(recovery_spent.get(k), spend) or spend
        relaxed_spent, other_spent = (
            _add(relaxed_spent, e.relaxed_spent),
            _add(other_spent, e.other_spent),
        )
    return AgentEvidence(
        sum(e.relaxed_ok for e in items),
        sum(e.relaxed_n for e in items),
        sum(e.other_ok for e in items),
        sum(e.other_n for e in items),
        recovery,
        recovery_spent=recovery_spent,
        relaxed_spent=relaxed_spent,
        other_spent=other_spent,
        tasks=sum(e.tasks for e in items),
        succeeded=sum(e.succeeded for e in items),
        spent=sum(e.spent for e in items),
        first_failed=None
        if any(e.first_failed is None for e in items if e.tasks)
        else sum(e.first_failed or 0 for e in items),
    )


#: What each loaded book answered, per book object (``id`` → the book's ``agents`` dict, kept so
#: its id cannot be reused, and its answers). Why: every pre-check parsed every agent of the book
#: and pooled it three ways, ~0.1 ms of a ~0.2 ms scoring on the request path; a book is a loaded
#: model's metadata and is never changed in place. A new model's book is another object.
_READ: dict[int, tuple[dict[str, Any], dict[tuple[str, str, str], Any]]] = {}
_BOOKS_KEPT = 4


def _answers(agents: dict[str, Any]) -> dict[tuple[str, str, str], Any] | None:
    if not agents:
        return None
    kept = _READ.get(id(agents))
    if kept is None or kept[0] is not agents:
        if len(_READ) >= _BOOKS_KEPT:
            _READ.clear()
        kept = _READ[id(agents)] = (agents, {})
    return kept[1]


def _agents_of(book: dict[str, Any] | None) -> dict[str, Any]:
    return (book or {}).get("agents") or {}


def _kept(book: dict[str, Any] | None, key: tuple[str, str, str],
          read: Callable[[dict[str, Any]], Any]) -> Any:
    """``read(book's agents)``, once per book object and ``key``."""
    agents = _agents_of(book)
    answers = _answers(agents)
    if answers is not None and key in answers:
        return answers[key]
    found = read(agents)
    if answers is not None:
        answers[key] = found
    return found


def own_evidence(book: dict[str, Any] | None, project: str, agent: str) -> AgentEvidence:
    """This agent's own record in the book (empty when it has none), read once per book."""
    return _kept(book, ("own", project, agent),
                 lambda agents: AgentEvidence.from_dict(agents.get(f"{project}/{agent}") or {}))


def evidence_for(
    book: dict[str, Any] | None, project: str, agent: str
) -> tuple[AgentEvidence, str]:
    """The agent's own history when it holds :data:`MIN_RETRIES` retries of each kind, else its
    project's, else every agent's: the closest history that can say something (read once per
    book and agent)."""
    return _kept(book, ("pooled", project, agent),
                 lambda agents: _closest_history(agents, project, agent))


def _closest_history(raw: dict[str, Any], project: str, agent: str) -> tuple[AgentEvidence, str]:
    agents = {key: AgentEvidence.from_dict(value) for key, value in raw.items()}
    levels = [
        (f"{agent}'s history", [agents[k] for k in agents if k == f"{project}/{agent}"]),
        (
            f"project {project}'s history",
            [v for k, v in agents.items() if k.startswith(f"{project}/")],
        ),
        ("every agent's history", list(agents.values())),
    ]
    for words, items in levels:
        pooled = _sum(items)
        if pooled.relaxed_n >= MIN_RETRIES and pooled.other_n >= MIN_RETRIES:
            return pooled, words
    return _sum(levels[-1][1]), levels[-1][0]


def degrade_bar(own: AgentEvidence) -> tuple[float, str]:
    """The risk from which an input is "riskier than its agent's usual task": :data:`DEGRADE_RELATIVE`
    times the agent's own task failure rate, at least :data:`DEGRADE_FLOOR` and never above
    :data:`DEGRADE_AT` (``DEGRADE_AT`` alone
    when the book holds none of its tasks), with that bar in words.

    A fixed bar missed the agents that rarely fail: the default fleet's extractor fails ~3-12 % of
    its tasks and its riskiest invoices scored 0.08-0.24, below 0.2, where its history did support
    simplified retries (seeds 8 and 10)."""
    if not own.tasks:
        return DEGRADE_AT, f"the {DEGRADE_AT:.0%} bar (no task of this agent in the history)"
    rate = 1 - own.succeeded / own.tasks
    bar = min(DEGRADE_AT, max(DEGRADE_FLOOR, DEGRADE_RELATIVE * rate))
    return bar, (
        f"{bar:.0%} ({DEGRADE_RELATIVE:g} × this agent's failure rate {rate:.0%}, "
        f"within {DEGRADE_FLOOR:.0%}-{DEGRADE_AT:.0%})"
    )




@dataclass(frozen=True)
class Segment:
    """The part of an agent's record that a pre-check of this risk reads (:mod:`.advice_segments`):
    ``evidence`` is ``None`` where the risk sits within the model's uncertainty of the bar (no
    segment's record speaks for it, so no kind read from one is given)."""

    evidence: AgentEvidence | None
    words: str


def segment_for(book: dict[str, Any] | None, project: str, agent: str, risk: float,
                margin: float = 0.0) -> Segment | None:
    """This agent's record for tasks scored like ``risk``: its high-risk tasks' at or above the bar
    (by ``margin`` or more), the others' below it; ``None`` when the book keeps no segments for it
    (a book before version 5, or too few tasks on a side): then the pooled record is read."""
    parts = _kept(book, ("segments", project, agent), lambda _agents: _segments_of(book, project, agent))
    if parts is None:
        return None
    bar, high, rest = parts
    if risk >= bar + margin:
        return Segment(high, f"{agent}'s tasks scored at or above {bar:.0%}")
    if risk < bar - margin:
        return Segment(rest, f"{agent}'s tasks scored below {bar:.0%}")
    return Segment(None, f"risk {risk:.0%} within the model's uncertainty ({margin:.0%}) of the {bar:.0%} bar")


def _segments_of(book: dict[str, Any] | None, project: str,
                 agent: str) -> tuple[float, AgentEvidence, AgentEvidence] | None:
    raw = ((book or {}).get("segments") or {}).get(f"{project}/{agent}")
    if not raw:
        return None
    return float(raw["bar"]), AgentEvidence.from_dict(raw["high"]), AgentEvidence.from_dict(raw["rest"])
