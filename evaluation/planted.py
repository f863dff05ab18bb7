"""Planted-truth scenarios for the policy report: faults known in advance, every candidate run live.

A report that tells an operator to change the fleet's retry policy must be right when the
truth is known. Here the faults are planted (one agent: 12 % rate limits with a
Retry-After, a claim kind that fails validation 95 % of the time, a claim that is a logic
error every time), the live policy's log is what the report reads, and each candidate is
then run *live* on the same seeded tasks (:func:`~.ground_truth.run_ground_truth`), so its
true effect is measured, not modelled. ``tests/evaluation/test_planted_truth.py`` holds the
verdicts and intervals to that truth; ``bench/planted_truth.py`` measures interval coverage
and the off-policy estimators over many seeds.

A :class:`Setup` is a live policy, the candidates judged against it (each a change of the
live policy's fields, merged as a candidate file is) and, optionally, the stop exploration
the live policy runs (``explore``: the candidate it explores and the rate), which is what
gives a higher cap or budget its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from retrylens.sdk.core.policy import RetryPolicy
from retrylens.simulation import Scenario, fleet_policy
from retrylens.simulation.scenario import parse_scenario

from .candidates import deep_merge, overlay
from .ground_truth import GroundTruth, run_ground_truth
from .off_policy import evaluate
from .replay import PolicyReplay, replay
from .report import Margins, policy_entry, recommend

#: The planted faults. The policy fields are the live policy of each :class:`Setup`.
CLAIMS: dict[str, Any] = {
    "name": "planted-claims",
    "description": "one agent; 12 % rate limits with Retry-After; 'disputed' claims fail validation 95 % of "
                   "the time; 'ring' claims are a logic error every time",
    "span_hours": 4,
    "dependencies": {
        "llm": {"kind": "model", "rate_limit": 0.12, "retry_after_ms": [500, 2000], "rate_limited_repeat": 0.9,
                "latency_ms": 900, "usd_per_1k_in": 0.001, "usd_per_1k_out": 0.004},
        "claims.db": {"kind": "tool", "latency_ms": 200},
    },
    "templates": [{
        "name": "claim", "project": "planted", "agent": "claims-agent", "model": "llm",
        "text": "review the {kind} claim {ref}",
        "values": {"kind": ["standard", "standard", "standard", "disputed", "ring"],
                   "ref": [f"C-{i}" for i in range(40)]},
        "size_tokens": [200, 600], "tools": ["claims.db"],
        "steps": [{"name": "lookup", "phase": "execution", "dependency": "claims.db"},
                  {"name": "decide", "phase": "answer", "dependency": "model", "structured_output": True}],
        "schema_mismatch": 0.0, "validation": 0.02, "planning_failure": 0.0,
        "keyword_risk": {"disputed": {"validation": 100.0}}, "logic_markers": ["ring"], "recurring_share": 0.0,
    }],
    "pollution": {"weight": 0.0},
}

#: Two agents whose validation failures recover differently: the intake agent's answers fail the
#: check 50 % of the time per attempt, independently (a retry recovers half the time); the audit
#: agent's 'sealed' claims fail it every time (its check can never pass: a retry never recovers).
#: A retry with a failure note helps neither (``failure_summary_fix`` 0), so the per-agent truth
#: is plain: raising the validation cap helps intake and can do nothing for audit. A report that
#: pooled the two agents' retries would lend audit intake's rate (and intake audit's).
TWO_AGENTS: dict[str, Any] = {
    "name": "planted-two-agents",
    "description": "two agents; intake's validation failures recover on retry half the time, audit's "
                   "'sealed' claims never pass validation",
    "span_hours": 4,
    "dependencies": {
        "llm": {"kind": "model", "latency_ms": 900, "usd_per_1k_in": 0.001, "usd_per_1k_out": 0.004},
        "claims.db": {"kind": "tool", "latency_ms": 200},
    },
    "model_behaviour": {"failure_summary_fix": 0.0},
    "templates": [
        {"name": "intake", "project": "planted", "agent": "intake-agent", "model": "llm",
         "text": "file the claim {ref}", "values": {"ref": [f"I-{i}" for i in range(40)]},
         "size_tokens": [200, 600], "tools": ["claims.db"],
         "steps": [{"name": "lookup", "phase": "execution", "dependency": "claims.db"},
                   {"name": "decide", "phase": "answer", "dependency": "model", "structured_output": True}],
         "schema_mismatch": 0.0, "validation": 0.5, "planning_failure": 0.0, "recurring_share": 0.0},
        {"name": "audit-sealed", "project": "planted", "agent": "audit-agent", "model": "llm", "weight": 0.4,
         "text": "audit the sealed claim {ref}", "values": {"ref": [f"A-{i}" for i in range(40)]},
         "size_tokens": [200, 600], "tools": ["claims.db"],
         "steps": [{"name": "lookup", "phase": "execution", "dependency": "claims.db"},
                   {"name": "decide", "phase": "answer", "dependency": "model", "structured_output": True}],
         "schema_mismatch": 0.0, "validation": 1.0, "planning_failure": 0.0, "recurring_share": 0.0},
        {"name": "audit-open", "project": "planted", "agent": "audit-agent", "model": "llm", "weight": 0.6,
         "text": "audit the open claim {ref}", "values": {"ref": [f"B-{i}" for i in range(40)]},
         "size_tokens": [200, 600], "tools": ["claims.db"],
         "steps": [{"name": "lookup", "phase": "execution", "dependency": "claims.db"},
                   {"name": "decide", "phase": "answer", "dependency": "model", "structured_output": True}],
         "schema_mismatch": 0.0, "validation": 0.0, "planning_failure": 0.0, "recurring_share": 0.0},
    ],
    "pollution": {"weight": 0.0},
}

LIVE: dict[str, Any] = {"id": "claims-live", "version": "1",
                        "caps": {"rate_limit": 3, "validation": 1, "logic": 0},
                        "budget": {"max_attempts": 3}}


@dataclass(frozen=True)
class Setup:
    """A live policy, candidates as changes to it, and the stop exploration the live policy runs."""

    name: str
    live: dict[str, Any]
    candidates: dict[str, dict[str, Any]]
    explore: tuple[str, float] | None = None      # (candidate explored, explore_stops rate)
    #: what the truth says each candidate is: "gain", "loss" or "none" (within the margin)
    expected: dict[str, str] = field(default_factory=dict)
    #: the planted faults the live policy runs on
    faults: dict[str, Any] = field(default_factory=lambda: CLAIMS)


SETUPS: dict[str, Setup] = {
    "claims": Setup("claims", LIVE, {
        "logic-cap-up": {"caps": {"logic": 2}},                 # a class the log never retried
        "validation-cap-up": {"caps": {"validation": 3}},       # past the live cap
        "budget-up": {"budget": {"max_attempts": 6}},           # past the live budget
        "rate-limit-cap-down": {"caps": {"rate_limit": 0}},     # lower caps: observed, exact
        "validation-cap-down": {"caps": {"validation": 0}},
        "budget-down": {"budget": {"max_attempts": 2}},
        "slower-backoff": {"backoff": {"base_ms": 1500, "cap_ms": 20000}},
        "null-change": {"version": "2"},
    }),
    "claims-gives-up-on-429": Setup("claims-gives-up-on-429", deep_merge(LIVE, {"caps": {"rate_limit": 0}}), {
        "retry-429": {"caps": {"rate_limit": 3}},
    }),
    "claims-explores-logic": Setup("claims-explores-logic", LIVE, {
        "logic-cap-up": {"caps": {"logic": 2}},
    }, explore=("logic-cap-up", 0.5)),
    "claims-explores-429": Setup("claims-explores-429", deep_merge(LIVE, {"caps": {"rate_limit": 0}}), {
        "retry-429": {"caps": {"rate_limit": 3}},
    }, explore=("retry-429", 0.5)),
    # per-agent conditioning: the same raise of the validation cap, two agents' own evidence
    "two-agents-explore-validation": Setup("two-agents-explore-validation", LIVE, {
        "validation-cap-up": {"caps": {"validation": 2}},
    }, explore=("validation-cap-up", 0.5), faults=TWO_AGENTS),
}


def scenario_of(setup: Setup) -> Scenario:
    """The planted scenario running ``setup``'s live policy (and its stop exploration)."""
    shadow: dict[str, Any] = {}
    if setup.explore is not None:
        name, rate = setup.explore
        shadow = {"candidate": setup.candidates[name], "explore_stops": rate}
    return parse_scenario({**setup.faults, "policy": setup.live, "shadow": shadow}, source=f"planted {setup.name}")


def candidates_of(setup: Setup, live: RetryPolicy) -> dict[str, RetryPolicy]:
    """Each candidate as a full policy: the live one with its changes (no shadow section)."""
    return {name: overlay(live, changes, source=name).model_copy(update={"id": name})
            for name, changes in setup.candidates.items()}


@dataclass
class PlantedRun:
    """One seed of one setup: the log, each candidate's true effect and what the report made of it."""

    setup: Setup
    truth: GroundTruth
    replays: list[PolicyReplay]
    recommendation: dict[str, Any]

    def true_diff(self, name: str, metric: str = "success") -> float:
        """The candidate's true mean minus the live policy's (without exploration), same tasks."""
        base = "live-greedy" if "live-greedy" in self.truth.truth else "live"
        return float(self.truth.truth[name][metric].mean() - self.truth.truth[base][metric].mean())

    def true_diff_of_agent(self, name: str, agent: str, metric: str = "success") -> float:
        """:meth:`true_diff` on ``agent``'s tasks alone."""
        base = "live-greedy" if "live-greedy" in self.truth.truth else "live"
        mine = self.truth.log.agents == agent
        return float(self.truth.truth[name][metric][mine].mean() - self.truth.truth[base][metric][mine].mean())

    def verdict(self, name: str) -> str:
        return next(v["verdict"] for v in self.recommendation["candidates"] if v["name"] == name)

    def replay_of(self, name: str) -> PolicyReplay:
        return next(r for r in self.replays if r.name == name)

    def off_policy(self, name: str) -> dict[str, float]:
        """IPS, SNIPS and DR estimates of the candidate's success rate from the live log."""
        live = self.truth.live
        target = candidates_of(self.setup, live)[name]
        result = evaluate(self.truth.log, target, live, name=name)
        return {k: result.estimates[k]["success"].value for k in ("ips", "snips", "dr")}


def run_planted(setup: Setup, *, seed: int, tasks: int = 400, replicates: int = 200,
                margins: Margins | None = None) -> PlantedRun:
    """Log ``setup``'s live policy, judge its candidates, and run each of them live for the truth."""
    scenario = scenario_of(setup)
    live = fleet_policy(scenario)
    candidates = candidates_of(setup, live)
    gt = run_ground_truth(scenario, candidates, tasks=tasks, seed=seed, include_greedy=setup.explore is not None)
    results = replay(gt.log, live, candidates, replicates=replicates, seed=seed)
    entries = [policy_entry(r, policy, "planted") for r, policy in zip(results, [live, *candidates.values()],
                                                                       strict=True)]
    return PlantedRun(setup, gt, results, recommend(entries, margins))


def covered(run: PlantedRun, name: str, metric: str = "success") -> bool:
    """Is the candidate's true difference inside the report's 95 % interval (bounds when unsupported)?"""
    r = run.replay_of(name)
    truth = run.true_diff(name, metric)
    if r.unsupported.any():
        b = r.bounds[metric]
        return bool(b.lo - 1e-12 <= truth <= b.hi + 1e-12)
    d = r.diff_vs_live[metric]
    return bool(d.lo - 1e-12 <= truth <= d.hi + 1e-12)


def truth_table(run: PlantedRun) -> list[dict[str, Any]]:
    """Per candidate: verdict, estimate, interval, bounds and the truth (for benches and failure messages)."""
    rows = []
    for r in run.replays[1:]:
        d, b = r.diff_vs_live["success"], r.bounds["success"]
        rows.append({"setup": run.setup.name, "seed": run.truth.seed, "candidate": r.name,
                     "verdict": run.verdict(r.name), "estimate": round(d.value, 4),
                     "ci": [round(d.lo, 4), round(d.hi, 4)], "bounds": [round(b.lo, 4), round(b.hi, 4)],
                     "unsupported_share": round(float(r.unsupported.mean()), 4),
                     "truth": round(run.true_diff(r.name), 4), "covered": covered(run, r.name),
                     "ci_covered": bool(d.lo - 1e-12 <= run.true_diff(r.name) <= d.hi + 1e-12)})
        verdicts = next(v for v in run.recommendation["candidates"] if v["name"] == r.name).get("by_agent") or {}
        if r.by_agent:
            rows[-1]["by_agent"] = {}
        for agent, judged in r.by_agent.items():
            a, truth = judged.diff_vs_live["success"], run.true_diff_of_agent(r.name, agent)
            rows[-1]["by_agent"][agent] = {
                "verdict": verdicts[agent]["verdict"], "estimate": round(a.value, 4),
                "ci": [round(a.lo, 4), round(a.hi, 4)], "truth": round(truth, 4),
                "unsupported_share": round(judged.unsupported_share, 4),
                "ci_covered": bool(a.lo - 1e-12 <= truth <= a.hi + 1e-12)}
    return rows
