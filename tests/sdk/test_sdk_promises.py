"""Issue 12's broken promises, one test each, asserted on emitted (flushed) events."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from retrylens.errors import GaveUp, HandedOff
from retrylens.schemas import Decision, EventKind, SideEffectStatus
from retrylens.sdk import CallbackChannel, Governor, MemoryKeyStore
from retrylens.sdk.core.backoff import wait_from_policy
from retrylens.sdk.core.policy import BackoffPolicy, RetryPolicy, TaskBudget
from retrylens.sdk.text.sanitizer import classify
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)


def governor(**kwargs: object) -> Governor:
    kwargs.setdefault("rng", random.Random(7))
    return Governor.with_virtual_time(start=START, **kwargs)  # type: ignore[arg-type]


# -- 2. async side effects ---------------------------------------------------------------
class AsyncProvider:
    def __init__(self) -> None:
        self.charges: list[str] = []
        self.by_key: dict[str, str] = {}
        self.fail_first = True

    async def charge(self, amount: int, *, idempotency_key: str) -> str:
        await asyncio.sleep(0)
        if idempotency_key not in self.by_key:
            self.by_key[idempotency_key] = f"ch_{len(self.charges)}"
            self.charges.append(self.by_key[idempotency_key])
        if self.fail_first:
            self.fail_first = False
            raise TimeoutError("gateway did not answer")
        return self.by_key[idempotency_key]


def test_async_side_effect_awaits_before_committing_and_retries_the_coroutine_function() -> None:
    provider = AsyncProvider()
    with capture_events() as captured:
        gov = governor(emit=captured.emit)
        pay = gov.side_effect("payments.charge", step="charge")(provider.charge)

        async def checkout() -> str:
            return await pay(4200)

        assert asyncio.run(gov.acall(checkout, goal="charge cart c-1", agent="checkout")) == "ch_0"
        statuses = [e.side_effects[0].status for e in captured.of_kind(EventKind.SIDE_EFFECT)]
    assert provider.charges == ["ch_0"]
    assert statuses == [SideEffectStatus.FAILED, SideEffectStatus.COMMITTED]


# -- 3. usage and money budgets ----------------------------------------------------------
def test_cost_budget_triggers_through_call_and_costs_reach_events() -> None:
    from retrylens.sdk.core.usage import Usage

    policy = RetryPolicy(budget=TaskBudget(max_attempts=15, max_cost_usd=0.05))
    calls = 0

    def ask(attempt) -> str:  # noqa: ANN001
        nonlocal calls
        calls += 1
        attempt.report(Usage(tokens_in=1000, tokens_out=200, cost_usd=0.02))
        raise TimeoutError("model timed out")

    with capture_events() as captured:
        gov = governor(policy=policy, emit=captured.emit)
        with pytest.raises(GaveUp) as stopped:
            gov.call(ask, goal="summarise", agent="a")
        events = captured.events
    assert calls == 3  # 0.02, 0.04, 0.06 ≥ 0.05: no fourth attempt
    assert "cost budget exhausted" in stopped.value.verdict.reason
    failed = [e for e in events if e.kind == EventKind.ATTEMPT_FAILED]
    assert [e.cost_usd for e in failed] == [0.02, 0.02, 0.02]
    assert [e.tokens_in for e in failed] == [1000, 1000, 1000]
    finished = [e for e in events if e.kind == EventKind.TASK_FINISHED]
    assert finished[0].cost_usd == pytest.approx(0.06)


@pytest.mark.parametrize(
    "answer",
    [
        {"text": "hi", "usage": {"prompt_tokens": 11, "completion_tokens": 7}},  # OpenAI dict
        type("Msg", (), {"usage_metadata": {"input_tokens": 11, "output_tokens": 7}})(),  # LangChain
        type("Resp", (), {"usage": type("U", (), {"input_tokens": 11, "output_tokens": 7})()})(),
    ],
)
def test_usage_is_read_from_the_return_value_on_the_fast_path(answer: object) -> None:
    with capture_events() as captured:
        gov = governor(emit=captured.emit)
        gov.call(lambda: answer, goal="greet", agent="a")
        (event,) = captured.events
    assert (event.tokens_in, event.tokens_out) == (11, 7)


# -- 4. controls reach running tasks -----------------------------------------------------
def test_kill_switch_flipped_mid_task_stops_the_next_retry() -> None:
    calls = 0
    gov = governor()

    def work() -> str:
        nonlocal calls
        calls += 1
        if calls == 2:  # the task is running under the old policy by now
            gov.source.kill()
        raise TimeoutError("slow")

    with pytest.raises((GaveUp, HandedOff)) as stopped:
        gov.call(work, goal="g", agent="a")
    assert calls == 2
    assert "kill switch" in stopped.value.verdict.reason


def test_open_breaker_without_fallback_fails_new_tasks_fast() -> None:
    calls = 0

    def flaky() -> str:
        nonlocal calls
        calls += 1
        raise ConnectionError("refused")

    with capture_events() as captured:
        gov = governor(emit=captured.emit)
        for _ in range(12):  # open the breaker (min_calls 10, ratio 0.5)
            gov.breakers["db"].record(False)
        assert gov.breaker_open("db")
        for i in range(5):
            with pytest.raises((GaveUp, HandedOff)):
                gov.call(flaky, goal=f"task {i}", agent="a", dependency="db")
        decisions = captured.of_kind(EventKind.DECISION)
    assert calls == 0
    assert len(decisions) == 5 and all("circuit breaker" in d.decision_reason for d in decisions)


def test_preflight_human_review_hands_off_before_the_task_runs() -> None:
    from retrylens.sdk.core.preflight import PrecheckResponse, apply_advice

    class Advice:
        def adapt(self, run):  # noqa: ANN001, ANN202
            apply_advice(
                run,
                PrecheckResponse.model_validate(
                    {"risk": 0.9, "recommended": {"human_review": True}}
                ),
            )

    packages = []
    ran = 0

    def work() -> str:
        nonlocal ran
        ran += 1
        return "done"

    gov = governor(preflight=Advice(), handoff=CallbackChannel(packages.append))
    with pytest.raises(HandedOff):
        gov.call(work, goal="wire money", agent="a")
    assert ran == 0 and len(packages) == 1 and "pre-flight" in packages[0].reason


# -- 5. backoff --------------------------------------------------------------------------
def test_jittered_backoff_never_exceeds_its_cap() -> None:
    wait = wait_from_policy(BackoffPolicy(base_ms=500, cap_ms=8000, jitter=0.3))

    class View:
        retries = 10
        retry_after_ms = None
        rng = random.Random(3)

    assert max(wait(View) for _ in range(500)) <= 8000


def test_retry_after_as_an_http_date_is_honoured() -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)

    class RateLimited(Exception):
        status_code = 429
        headers = {"Retry-After": format_datetime(when, usegmt=True)}

    failure = classify(RateLimited("slow down"))
    assert failure.retry_after_ms is not None and 25_000 <= failure.retry_after_ms <= 31_000


# -- 6. unclassifiable failures go to a human early, and the event says why --------------
def test_unknown_failure_is_handed_off_with_a_reason() -> None:
    packages = []
    with capture_events() as captured:
        gov = governor(emit=captured.emit, handoff=CallbackChannel(packages.append))
        with pytest.raises(HandedOff):
            gov.call(lambda: (_ for _ in ()).throw(RuntimeError("weird")), goal="g", agent="a")
        (decision,) = captured.of_kind(EventKind.DECISION)
    assert decision.decision is Decision.HANDOFF_HUMAN
    assert "0/0" not in decision.decision_reason
    assert "unclassified" in decision.decision_reason


# -- 7. side-effect contracts on ambiguous timeouts --------------------------------------
class Ledger:
    """A tool that takes no idempotency key: every call books again."""

    def __init__(self) -> None:
        self.entries: list[int] = []
        self.timeouts_after = 1

    def book(self, amount: int) -> str:
        self.entries.append(amount)
        if self.timeouts_after:
            self.timeouts_after -= 1
            raise TimeoutError("no answer")
        return f"entry {len(self.entries)}"

    def booked(self, amount: int) -> bool:
        return amount in self.entries


def test_verify_contract_checks_instead_of_repeating_an_ambiguous_timeout() -> None:
    ledger = Ledger()
    with capture_events() as captured:
        gov = governor(emit=captured.emit)
        book = gov.side_effect("ledger.book", verify=ledger.booked)(ledger.book)
        gov.call(lambda: book(70), goal="book 70", agent="a")
        statuses = [e.side_effects[0].status for e in captured.of_kind(EventKind.SIDE_EFFECT)]
    assert ledger.entries == [70]
    assert statuses[-1] is SideEffectStatus.COMMITTED


def test_unsafe_contract_hands_off_instead_of_repeating() -> None:
    ledger = Ledger()
    packages = []
    gov = governor(handoff=CallbackChannel(packages.append))
    book = gov.side_effect("ledger.book", unsafe=True)(ledger.book)
    with pytest.raises(HandedOff):
        gov.call(lambda: book(70), goal="book 70", agent="a")
    assert ledger.entries == [70]
    assert "ambiguous" in packages[0].reason


# -- 8. the hand-off package: output and error detail, redacted, stored ------------------
def test_handoff_package_has_output_and_error_and_is_stored_with_the_event() -> None:
    packages = []

    def answer() -> str:
        raise ValueError('model said {"total": "n/a"} for card 4111 1111 1111 1111')

    with capture_events() as captured:
        gov = governor(emit=captured.emit, handoff=CallbackChannel(packages.append))
        with pytest.raises(HandedOff):
            gov.call(answer, goal="total the invoice", agent="a")
        (handoff,) = captured.of_kind(EventKind.HANDOFF)
    data = packages[0].to_dict()
    assert data["errors"][-1]["message"].startswith("ValueError")
    assert "4111" not in str(data)
    assert handoff.error_detail is not None and handoff.error_detail.code == "ValueError"
    stored = {m.role: m.content for m in handoff.context_snapshot.last_messages}
    assert "total the invoice" in stored["handoff:input"]
    assert "ValueError" in stored["handoff:errors"]


# -- 9. dead settings --------------------------------------------------------------------
def test_success_check_rejects_an_output_and_the_task_retries() -> None:
    outputs = iter(["", "a real answer"])
    with capture_events() as captured:
        gov = governor(emit=captured.emit)
        with gov.start("answer", agent="a", success_check=bool) as run:
            while True:
                attempt = run.begin()
                out = next(outputs)
                try:
                    run.succeed(attempt, out)
                except Exception as exc:  # noqa: BLE001
                    run.wait(run.fail(attempt, exc))
                    continue
                break
        kinds = captured.kinds()
    assert kinds.count("attempt_failed") == 1 and kinds.count("attempt_succeeded") == 1


def test_preflight_note_is_emitted() -> None:
    from retrylens.sdk.core.preflight import PrecheckResponse, apply_advice

    class Advice:
        def adapt(self, run):  # noqa: ANN001, ANN202
            apply_advice(
                run, PrecheckResponse.model_validate({"risk": 0.4, "model_version": "m7"})
            )

    with capture_events() as captured:
        gov = governor(emit=captured.emit, preflight=Advice())
        gov.call(lambda: "ok", goal="g", agent="a")
        events = captured.events
    assert any("risk 0.40 (m7)" in e.decision_reason for e in events)


def test_governor_has_no_dead_ledger_map() -> None:
    assert not hasattr(governor(), "_ledgers")


# -- 10. async paths never block the loop ------------------------------------------------
def test_acall_runs_blocking_key_store_io_off_the_event_loop() -> None:
    import threading

    loop_thread: list[int] = []
    io_threads: list[int] = []

    class SlowStore(MemoryKeyStore):
        def get(self, key):  # noqa: ANN001, ANN202
            io_threads.append(threading.get_ident())
            return super().get(key)

    gov = governor(key_store=SlowStore())

    async def pay(amount: int) -> int:
        return amount

    guarded = gov.side_effect("pay")(pay)

    async def main() -> int:
        loop_thread.append(threading.get_ident())
        return await gov.acall(lambda: guarded(3), goal="g", agent="a")

    assert asyncio.run(main()) == 3
    assert io_threads and loop_thread[0] not in io_threads


# -- 11. step-level retries ----------------------------------------------------------------
class Tools:
    """Two reads and a write without idempotency keys; the write times out once after it ran."""

    def __init__(self) -> None:
        self.reads = 0
        self.lookups = 0
        self.booked: list[int] = []
        self.faults = {"lookup": 1, "book_after": 1}

    def read(self) -> int:
        self.reads += 1
        return 70

    def lookup(self) -> int:
        self.lookups += 1
        if self.faults["lookup"]:
            self.faults["lookup"] -= 1
            raise TimeoutError("lookup timed out")
        return 1

    def book(self, amount: int) -> str:
        self.booked.append(amount)
        if self.faults["book_after"]:
            self.faults["book_after"] -= 1
            raise TimeoutError("booking timed out after it ran")
        return "ok"


def test_a_failed_step_is_retried_in_place_not_the_whole_task() -> None:
    tools = Tools()
    with capture_events() as captured:
        gov = governor(emit=captured.emit)

        def task() -> str:
            amount = gov.step("read", tools.read)
            gov.step("lookup", tools.lookup, dependency="orders")
            return gov.step("book", tools.book, amount, verify=lambda a: a in tools.booked)

        assert gov.call(task, goal="book it", agent="a") is None  # verified: no result value
        decisions = captured.of_kind(EventKind.DECISION)
    assert tools.reads == 1  # the completed read was not repeated
    assert tools.lookups == 2  # the failed lookup was retried in place
    assert tools.booked == [70]  # the ambiguous write was verified, not repeated
    assert [d.decision for d in decisions] == [Decision.RETRY_BACKOFF]
    assert decisions[0].dependency == "orders"


def test_a_re_run_task_resumes_after_its_last_completed_step() -> None:
    tools = Tools()
    tools.faults["lookup"] = 0
    runs = 0
    gov = governor()

    def task() -> int:
        nonlocal runs
        runs += 1
        gov.step("read", tools.read)
        gov.step("lookup", tools.lookup)
        if runs == 1:
            raise TimeoutError("the agent's own code timed out after both steps")
        return runs

    assert gov.call(task, goal="g", agent="a") == 2
    assert (tools.reads, tools.lookups) == (1, 1)


def test_step_retries_stop_at_the_class_cap_of_the_step() -> None:
    calls = 0

    def always_429() -> None:
        nonlocal calls
        calls += 1

        class RateLimited(Exception):
            status_code = 429

        raise RateLimited("slow down")

    gov = governor(policy=RetryPolicy(budget=TaskBudget(max_attempts=20)))
    with pytest.raises(GaveUp):
        gov.call(lambda: gov.step("s", always_429), goal="g", agent="a")
    assert calls == 1 + RetryPolicy().cap(classify(type("E", (Exception,), {"status_code": 429})()).error_type)


def test_rollback_runs_when_the_attempt_fails_after_the_tool_returned() -> None:
    reserved: list[str] = []
    released: list[str] = []
    runs = 0
    with capture_events() as captured:
        gov = governor(emit=captured.emit)
        reserve = gov.side_effect("inventory.reserve", rollback=released.append)(
            lambda item: reserved.append(item) or "r-1"
        )

        def task() -> str:
            nonlocal runs
            runs += 1
            reserve("sku-1")
            if runs == 1:
                raise TimeoutError("the model timed out after the reservation")
            return "ok"

        assert gov.call(task, goal="reserve and confirm", agent="a") == "ok"
        statuses = [e.side_effects[0].status for e in captured.of_kind(EventKind.SIDE_EFFECT)]
    assert released == ["sku-1"] and reserved == ["sku-1", "sku-1"]
    assert statuses == [
        SideEffectStatus.COMMITTED,
        SideEffectStatus.ROLLED_BACK,
        SideEffectStatus.COMMITTED,
    ]


# -- composable rules with their own parameters --------------------------------------------
def test_a_user_chain_of_parameterised_rules_decides() -> None:
    from retrylens.schemas import ErrorType
    from retrylens.sdk.core.backoff import wait_exponential
    from retrylens.sdk.core.rules import retry_by_class, stop_at_class_cap, stop_on_budget

    rules = (
        stop_on_budget(TaskBudget(max_attempts=10))
        | stop_at_class_cap({ErrorType.TIMEOUT: 1})
        | retry_by_class(wait=wait_exponential(100, cap_ms=100))
    )
    assert repr(rules) == (
        "stop_on_budget(TaskBudget(max_attempts=10, retries=9, retries_per_step=0.0, "
        "max_retries=9, max_tokens=None, max_cost_usd=None, deadline_s=None)) | "
        "stop_at_class_cap({'timeout': 1}) | "
        "retry_by_class(wait=wait_exponential(100, cap_ms=100))"
    )
    calls = 0

    def slow() -> None:
        nonlocal calls
        calls += 1
        raise TimeoutError("slow")

    with capture_events() as captured:
        gov = governor(emit=captured.emit, rules=rules)
        with pytest.raises(GaveUp):
            gov.call(slow, goal="g", agent="a")
        decisions = captured.of_kind(EventKind.DECISION)
    assert calls == 2
    assert [(d.decision, d.backoff_ms) for d in decisions] == [
        (Decision.RETRY_BACKOFF, 100),
        (Decision.GIVE_UP, 0),
    ]


# -- one state machine: the attempts loop --------------------------------------------------
def test_attempts_loop_records_failures_and_the_success() -> None:
    answers = iter([TimeoutError("slow"), "fine"])
    with capture_events() as captured:
        gov = governor(emit=captured.emit)
        with gov.start("g", agent="a") as run:
            for attempt in run.attempts():
                with attempt:
                    answer = next(answers)
                    if isinstance(answer, Exception):
                        raise answer
                    attempt.result = answer
        kinds = captured.kinds()
    assert attempt.result == "fine" and attempt.number == 2
    assert kinds == [
        "task_started",
        "attempt_started",
        "attempt_failed",
        "decision",
        "attempt_started",
        "attempt_succeeded",
        "task_finished",
    ]


def test_file_channel_given_a_folder_writes_a_file_inside_it(tmp_path) -> None:  # noqa: ANN001
    import json

    from retrylens.sdk.transport.handoff import FileChannel

    folder = f"{tmp_path}/handoffs/"
    gov = governor(handoff=FileChannel(folder))
    with pytest.raises(HandedOff):
        gov.call(lambda: (_ for _ in ()).throw(RuntimeError("odd")), goal="g", agent="a")
    (written,) = (tmp_path / "handoffs").iterdir()
    assert written.name == "handoffs.jsonl"
    assert json.loads(written.read_text())["error"]["code"] == "RuntimeError"


def test_acall_runs_the_preflight_check_off_the_event_loop() -> None:
    import threading

    threads: list[int] = []

    class Advice:
        def adapt(self, run):  # noqa: ANN001, ANN202
            threads.append(threading.get_ident())

    gov = governor(preflight=Advice())

    async def work() -> str:
        return "ok"

    async def main() -> tuple[str, int]:
        return await gov.acall(work, goal="g", agent="a"), threading.get_ident()

    answer, loop_thread = asyncio.run(main())
    assert answer == "ok" and threads and threads[0] != loop_thread


def test_the_name_processor_keeps_technical_words_of_a_reason() -> None:
    class RateLimited(Exception):
        status_code = 429
        headers = {"Retry-After": "2"}

    calls = 0

    def limited() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RateLimited("slow down")
        return "ok"

    with capture_events() as captured:
        gov = governor(emit=captured.emit)
        gov.call(limited, goal="g", agent="a")
        (decision,) = captured.of_kind(EventKind.DECISION)
    assert "Retry-After" in decision.decision_reason


def test_preflight_cap_advice_stops_retries_of_that_class_only() -> None:
    """Advice ``caps: {"logic": 0}``: a logic failure is not retried; other classes keep their caps."""
    from retrylens.schemas import ErrorType
    from retrylens.sdk.core.preflight import PrecheckResponse, apply_advice
    from retrylens.sdk.text.sanitizer import Failure

    class Advice:
        def adapt(self, run):  # noqa: ANN001, ANN202
            apply_advice(run, PrecheckResponse.model_validate(
                {"risk": 0.1, "recommended": {"caps": {"logic": 0, "not-a-class": 0}}}))

    def run(error: ErrorType) -> int:
        calls = 0

        def work() -> str:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise Failure(error, "no such order")
            return "done"

        gov = governor(preflight=Advice(), handoff=CallbackChannel(lambda _p: None))
        try:
            gov.call(work, goal="refund order 9999999", agent="a")
        except (GaveUp, HandedOff):
            pass
        return calls

    assert run(ErrorType.LOGIC) == 1  # without the advice the policy's logic cap (1) retries once
    assert run(ErrorType.VALIDATION) == 2
