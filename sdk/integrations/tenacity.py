"""Events from code that already retries with tenacity — no rewrite, just hooks.

    hooks = TenacityHooks(governor, goal="sync invoices", agent="billing", dependency="erp")

    @tenacity.retry(**hooks.kwargs(stop=stop_after_attempt(4), wait=wait_exponential(),
                                   retry=retry_if_exception_type(IOError)))
    def sync(): ...

Tenacity keeps deciding; every attempt, failure and decision becomes a RetryLens event.
With ``veto=True`` the governor may still stop a retry tenacity wanted (kill switch, task
budget, circuit breaker, known-bad input): its stop rules run before each sleep. Inside
one tenacity attempt, the retries an openai or anthropic client would make by itself are
the governor's, each an attempt (:mod:`.providers.client_retries`); when the governor stops there,
tenacity gets the client's error and does not try again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from retrylens.schemas import RETRYING_DECISIONS, Decision, TaskOutcome

from ..core import attempt_scope
from ..core.governor import Governor, TaskRun
from ..core.state import Attempt
from ..core.verdicts import Verdict
from .providers.client_retries import ClientRetries

_STOP_RULES = frozenset(
    {"stop_when_killed", "stop_on_budget", "stop_on_known_bad_input", "protect_dependency"}
)


class TenacityHooks:
    def __init__(
        self,
        governor: Governor,
        *,
        goal: str,
        agent: str = "agent",
        dependency: str = "",
        phase: str = "execution",
        veto: bool = True,
    ) -> None:
        self.g = governor
        self.goal, self.agent, self.dependency, self.phase, self.veto = (
            goal,
            agent,
            dependency,
            phase,
            veto,
        )
        self._runs: dict[int, tuple[TaskRun, ClientRetries | None]] = {}

    def kwargs(
        self,
        *,
        retry: Callable[[Any], bool] | None = None,
        stop: Callable[[Any], bool] | None = None,
        **others: Any,
    ) -> dict[str, Any]:
        """Keyword arguments for ``tenacity.retry``/``Retrying`` with our hooks around yours."""
        import tenacity

        return {
            **others,
            "before": self.before,
            "retry": self.wrap_retry(retry or tenacity.retry_if_exception_type()),
            "stop": self.wrap_stop(stop or tenacity.stop_never),
            "before_sleep": self.before_sleep,
        }

    # -- hooks ---------------------------------------------------------------------------
    def before(self, rs: Any) -> None:
        key = id(rs)
        if key not in self._runs:
            run = self.g.start(
                self.goal, agent=self.agent, phase=self.phase, dependency=self.dependency
            )
            self._runs[key] = (run, None)
        run, _ = self._runs[key]
        attempt = ClientRetries(run, run.begin())
        self._runs[key] = (run, attempt)
        # the attempt is ours to record: observe() must not record its provider calls again,
        # and the client's retries inside it are the governor's, each an attempt
        attempt_scope.recorded.set(attempt)

    def wrap_retry(self, inner: Callable[[Any], bool]) -> Callable[[Any], bool]:
        def retry(rs: Any) -> bool:
            attempt_scope.recorded.set(False)  # the attempt is over
            run, attempt = self._attempt(rs)
            if rs.outcome.failed and self._runs[id(rs)][1].stopped is not None:  # type: ignore[union-attr]
                # the governor stopped the task inside the call (the client's retry it refused
                # is recorded): tenacity raises the client's error, nothing is tried again
                self._finish(rs, run.outcome or TaskOutcome.FAILED)
                return False
            wants = bool(inner(rs))
            if not rs.outcome.failed:
                if not wants:
                    run.succeed(attempt, rs.outcome.result())
                    self._finish(rs, TaskOutcome.SUCCEEDED)
                return wants
            run.record_failure(attempt, rs.outcome.exception())
            if not wants:
                self._decide(
                    rs, Verdict(Decision.GIVE_UP, "tenacity: the exception is not retried")
                )
                return False
            if self.veto:
                verdict = run.decide()
                if verdict.rule in _STOP_RULES and verdict.decision not in RETRYING_DECISIONS:
                    self._decide(
                        rs,
                        Verdict(
                            verdict.decision, f"governor veto: {verdict.reason}", rule=verdict.rule
                        ),
                    )
                    return False
            return True

        return retry

    def wrap_stop(self, inner: Callable[[Any], bool]) -> Callable[[Any], bool]:
        def stop(rs: Any) -> bool:
            if inner(rs):
                self._decide(
                    rs,
                    Verdict(
                        Decision.GIVE_UP,
                        f"tenacity: stop condition met after {rs.attempt_number} attempts",
                    ),
                )
                return True
            return False

        return stop

    def before_sleep(self, rs: Any) -> None:
        run, attempt = self._attempt(rs)
        sleep_ms = int(round((rs.next_action.sleep if rs.next_action else 0) * 1000))
        decision = Decision.RETRY_BACKOFF if sleep_ms else Decision.RETRY_SAME
        run.record_decision(
            attempt,
            Verdict(
                decision,
                f"tenacity: retry {rs.attempt_number + 1} after {sleep_ms} ms",
                backoff_ms=sleep_ms,
            ),
        )

    # -- internals -----------------------------------------------------------------------
    def _attempt(self, rs: Any) -> tuple[TaskRun, Attempt]:
        """The task run and its attempt in progress (the client's retries advance it)."""
        run, recorder = self._runs[id(rs)]
        assert recorder is not None
        return run, recorder.attempt

    def _decide(self, rs: Any, verdict: Verdict) -> None:
        run, attempt = self._attempt(rs)
        run.record_decision(attempt, verdict)
        self._finish(rs, TaskOutcome.FAILED)

    def _finish(self, rs: Any, outcome: TaskOutcome) -> None:
        run, _ = self._runs.pop(id(rs))
        run.finish(outcome)
