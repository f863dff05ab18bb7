"""The four failure stories of the brief, the echoed-history case and context hygiene."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from retrylens.schemas import Decision, EventKind, SideEffectStatus
from retrylens.sdk import (
    CallbackChannel,
    Failure,
    Governor,
    HandedOff,
    MemoryKeyStore,
    SqliteKeyStore,
)
from retrylens.sdk.text.context import ContextBuilder, digest, drop_echoed_input, pollution_score
from retrylens.sdk.text.sanitizer import redact
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)


def governor(**kwargs: object) -> Governor:
    kwargs.setdefault("rng", random.Random(7))
    return Governor.with_virtual_time(start=START, **kwargs)  # type: ignore[arg-type]


class PaymentProvider:
    """Charges once per idempotency key; a timeout may come after the charge (the trap)."""

    def __init__(self) -> None:
        self.charges: list[str] = []
        self.by_key: dict[str, str] = {}
        self.timeouts_after_commit = 1

    def charge(self, amount: int, *, idempotency_key: str) -> str:
        if idempotency_key in self.by_key:
            return self.by_key[idempotency_key]
        receipt = f"ch_{len(self.charges)}"
        self.charges.append(receipt)
        self.by_key[idempotency_key] = receipt
        if self.timeouts_after_commit:
            self.timeouts_after_commit -= 1
            raise TimeoutError("payment gateway did not answer in 10 s")
        return receipt


def test_duplicate_payment_a_timed_out_charge_is_retried_and_charges_exactly_once(tmp_path) -> None:  # noqa: ANN001
    provider = PaymentProvider()
    with capture_events() as captured:
        gov = governor(emit=captured.emit, key_store=SqliteKeyStore(tmp_path / "keys.sqlite"))
        pay = gov.side_effect("payments.charge", step="charge")(provider.charge)
        assert gov.call(lambda: pay(4200), goal="charge cart c-1", agent="checkout") == "ch_0"
        effects = [e.side_effects[0] for e in captured.of_kind(EventKind.SIDE_EFFECT)]
    assert provider.charges == ["ch_0"]
    assert [s.status for s in effects] == [SideEffectStatus.FAILED, SideEffectStatus.COMMITTED]
    assert effects[0].idempotency_key == effects[1].idempotency_key


def test_committed_side_effect_is_never_executed_twice() -> None:
    store = MemoryKeyStore()
    executed = []
    gov = governor(key_store=store)

    def step(attempt) -> str:  # noqa: ANN001
        run = gov_run()
        result = run.side_effect("db.insert", lambda: executed.append(1) or "row-1", step="insert")
        if attempt.number == 1:
            raise TimeoutError("the answer step timed out after the insert")
        return result

    from retrylens.sdk.core.governor import current_run as gov_run

    assert gov.call(step, goal="insert a row", agent="a") == "row-1"
    assert executed == [1]


def test_failure_debt_rollback_runs_before_the_retry() -> None:
    rows: list[int] = []
    log: list[str] = []
    gov = governor()

    def insert_batch() -> None:
        rows.extend([1, 2, 3])
        raise ConnectionResetError("insert aborted half-way")

    def undo() -> None:
        log.append(f"rollback with {len(rows)} rows")
        rows.clear()

    guarded = gov.side_effect("crm.db", step="batch", rollback=lambda: undo())(insert_batch)
    attempts = []

    def work(attempt) -> str:  # noqa: ANN001
        attempts.append(list(rows))
        if attempt.number == 1:
            guarded()
        return "done"

    gov.call(work, goal="import leads", agent="sync")
    assert log == ["rollback with 3 rows"] and attempts == [[], []]


def test_duplicate_consumption_a_redelivered_message_resumes_the_task_instead_of_redoing_it() -> (
    None
):
    queue = [{"id": "msg-1", "order": 7}]
    acked: list[str] = []
    stock = {"sku": 10}
    store = MemoryKeyStore()
    gov = governor(key_store=store)
    crash = {"after_decrement": True}

    def consume_once() -> None:
        message = queue[0]
        run = gov.start(
            f"fulfil order {message['order']}", agent="fulfilment", task_id=f"task-{message['id']}"
        )
        with run:
            attempt = run.begin()
            run.side_effect(
                "inventory.decrement",
                lambda: stock.__setitem__("sku", stock["sku"] - 1),
                step="decrement",
            )
            if crash["after_decrement"]:
                crash["after_decrement"] = False
                run.fail(attempt, ConnectionResetError("worker lost its connection"))
                raise RuntimeError("worker crashed before the ack")
            run.succeed(attempt)
        acked.append(queue.pop(0)["id"])  # acknowledged only after success

    with pytest.raises(RuntimeError):
        consume_once()
    assert acked == [] and queue  # not acknowledged: the broker redelivers
    consume_once()
    assert acked == ["msg-1"] and stock["sku"] == 9


def test_context_drift_no_retry_context_contains_the_failed_output() -> None:
    bad_output = '{"items": [{"sku": "A1", "qty": 2'
    contexts: list[list[dict]] = []

    def fn(attempt) -> str:  # noqa: ANN001
        contexts.append(attempt.messages)
        if attempt.number < 3:
            raise Failure("validation", f"answer rejected: {bad_output}", output=bad_output)
        return "ok"

    governor().call(fn, goal="extract the line items", agent="x")
    for context in contexts[1:]:
        text = " ".join(m["content"] for m in context)
        assert bad_output not in text
        assert pollution_score(context) == 0.0


def test_infinite_loop_planning_stops_at_the_cap_and_hands_off_within_budget() -> None:
    packages = []
    with capture_events() as captured:
        gov = governor(emit=captured.emit, handoff=CallbackChannel(packages.append))
        calls = []

        def plan(attempt) -> None:  # noqa: ANN001
            calls.append(attempt.phase)
            raise Failure("validation", "plan did not converge")

        with pytest.raises(HandedOff, match="phase planning failed 2 times"):
            gov.call(
                plan, goal="compare every approach since 1990", agent="researcher", phase="planning"
            )
        decisions = captured.decisions()
    assert calls == ["planning", "planning"]
    assert decisions[-1] is Decision.HANDOFF_HUMAN and len(calls) <= gov.policy.budget.most_attempts
    assert packages[0].errors and packages[0].attempts == 2


def test_echoed_history_drops_the_duplicated_user_message() -> None:
    history = [
        {"role": "user", "content": "What is my balance?"},
        {"role": "assistant", "content": "Your balance is 10 EUR."},
        {"role": "user", "content": "Refund order 7 please"},
    ]
    kept, dropped = drop_echoed_input(history, "refund order 7   please")
    assert dropped == [history[2]] and kept == history[:2]
    built = ContextBuilder.for_input("Refund order 7 please", history=history).build()
    assert sum(m["content"] == "Refund order 7 please" for m in built) == 1


def test_pollution_score_rises_with_error_text_repeats_and_duplicates() -> None:
    clean = [{"role": "user", "content": "book a flight"}]
    polluted = clean + [
        {"role": "tool", "tool": "search", "args": {"q": "x"}, "content": "Error: 500 upstream"},
        {"role": "tool", "tool": "search", "args": {"q": "x"}, "content": "Error: 500 upstream"},
        {"role": "user", "content": "book a flight"},
    ]
    assert pollution_score(clean) == 0.0
    assert 0.5 < pollution_score(polluted) <= 1.0


def test_log_noise_full_snapshot_on_first_failure_then_deltas() -> None:
    with capture_events() as captured:
        gov = governor(emit=captured.emit)

        def fn(attempt) -> str:  # noqa: ANN001
            if attempt.number < 3:
                raise ValueError(f"bad answer #{attempt.number}")
            return "ok"

        gov.call(fn, goal="write the report", agent="a")
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
    assert len(failed) >= 2
    first, later = failed[0].context_snapshot, failed[1].context_snapshot
    assert first is not None and not first.is_delta and first.last_messages
    assert (
        later is not None
        and later.is_delta
        and len(later.message_digests) < later.message_count + 1
    )


def test_sanitizer_redacts_secrets_and_personal_data() -> None:
    text = (
        "call failed: Authorization: Bearer abcdefghijklmnop123 key=sk-ABCDEFGHIJKLMNOPQRSTUV "
        "url=postgres://admin:hunter2@db:5432/x mail ana@example.com card 4111 1111 1111 1111 "
        "order 12345678"
    )
    out = redact(text)
    for secret in (
        "abcdefghijklmnop123",
        "sk-ABCDEF",
        "hunter2",
        "ana@example.com",
        "4111 1111 1111 1111",
    ):
        assert secret not in out
    assert "order 12345678" in out


# Realistic secret forms (made up, shaped like the real ones) and personal data.
SECRETS = {
    "openai": "sk-proj-Zx81QmT4vB7nR2pL9sK3wY6dH0fJ5gCaEe",
    "anthropic": "sk-ant-api03-Qw3Er7Ty1Ui9Op5As2Df8Gh4Jk6Lz0Xc-Vb",
    "aws": "AKIAZ7QW3ER5TY1UI9OP",
    "github": "ghp_7Hq2Wm9Xk4Lp1Zr8Tn5Vb3Yc6Gd0Fs2Aj4Ke",
    "google": "AIzaSyB3x9Qw7Er5Ty1Ui3Op5As7Df9Gh1Jk3L",
    "bearer": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtZWkifQ.q8Zt3Kp",
    "password": "hunter2xyz",
    "token": "abc123secret",
    "url_password": "pw123zz",
    "card": "4111 1111 1111 1111",
    "email": "mei.chen@example.com",
}
PII_WORDS = (b"mei", b"chen")
SECRET_GOAL = (
    f"sync account of Mei Chen ({SECRETS['email']}) with token={SECRETS['token']} "
    f"password {SECRETS['password']} using {SECRETS['openai']} and {SECRETS['anthropic']}, "
    f"aws {SECRETS['aws']}, github {SECRETS['github']}, google {SECRETS['google']}, "
    f"header Authorization: Bearer {SECRETS['bearer']}, card {SECRETS['card']}"
)
SECRET_ERROR = (
    f"login failed for password={SECRETS['password']} at https://bob:{SECRETS['url_password']}@api.x"
    f" key {SECRETS['openai']} card {SECRETS['card']} for {SECRETS['email']}"
)


def _assert_no_secret(blob: bytes) -> None:
    assert blob, "nothing was emitted: the test would prove nothing"
    lowered = blob.lower()
    for name, secret in SECRETS.items():
        assert secret.encode().lower() not in lowered, f"{name} secret leaked"
        assert secret.replace(" ", "").encode() not in blob, f"{name} secret leaked"
    for word in PII_WORDS:
        assert word not in lowered, f"personal name {word!r} leaked"


def _flushed_bytes(captured) -> bytes:  # noqa: ANN001
    captured.events  # noqa: B018 - every record must parse back as an event (raises otherwise)
    return b"".join(k + v for k, v in captured.records())


def _flaky(attempt) -> str:  # noqa: ANN001
    if attempt.number > 1:
        return "ok"
    raise ValueError(SECRET_ERROR)


def test_secrets_never_reach_events_from_call_fast_path_and_retries() -> None:
    with capture_events() as captured:
        gov = governor(emit=captured.emit)
        gov.call(lambda: "ok", goal=SECRET_GOAL, agent="a")
        gov.call(_flaky, goal=SECRET_GOAL, agent="a")
        blob = _flushed_bytes(captured)
        assert len(captured.events) > 4
    _assert_no_secret(blob)


def test_secrets_never_reach_events_from_acall() -> None:
    import asyncio

    async def flaky(attempt) -> str:  # noqa: ANN001
        return _flaky(attempt)

    async def ok() -> str:
        return "ok"

    async def main(gov: Governor) -> None:
        await gov.acall(ok, goal=SECRET_GOAL, agent="a")
        await gov.acall(flaky, goal=SECRET_GOAL, agent="a")

    with capture_events() as captured:
        asyncio.run(main(governor(emit=captured.emit)))
        blob = _flushed_bytes(captured)
    _assert_no_secret(blob)


def test_secrets_never_reach_handoff_packages_or_their_events() -> None:
    import json

    packages = []
    with capture_events() as captured:
        gov = governor(emit=captured.emit, handoff=CallbackChannel(packages.append))
        with pytest.raises(HandedOff):
            gov.call(
                lambda: (_ for _ in ()).throw(RuntimeError(SECRET_ERROR)),
                goal=SECRET_GOAL,
                agent="a",
            )
        blob = _flushed_bytes(captured)
    assert packages
    _assert_no_secret(blob)
    for package in packages:
        text = json.dumps(package.to_dict()).encode()
        for name, secret in SECRETS.items():
            assert secret.encode() not in text, f"{name} secret in the hand-off package"


def test_secrets_never_reach_events_from_the_tenacity_adapter() -> None:
    import tenacity

    from retrylens.sdk.integrations.tenacity import TenacityHooks

    with capture_events() as captured:
        hooks = TenacityHooks(governor(emit=captured.emit), goal=SECRET_GOAL, agent="billing")
        calls: list[int] = []

        @tenacity.retry(
            **hooks.kwargs(stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_none())
        )
        def sync() -> str:
            calls.append(1)
            if len(calls) < 2:
                raise ConnectionResetError(SECRET_ERROR)
            return "synced"

        assert sync() == "synced"
        blob = _flushed_bytes(captured)
    _assert_no_secret(blob)


def test_secrets_and_customer_names_never_reach_events_from_the_simulated_fleet() -> None:
    from retrylens.simulation.fleet import run_fleet
    from retrylens.simulation.scenario import load_scenario

    with capture_events() as captured:
        run_fleet(load_scenario(), tasks=40, seed=11, emit=captured.emit, start=START)
        blob = _flushed_bytes(captured)
    lowered = blob.lower()
    for name in (b"ana silva", b"silva", b"novak", b"berg", b"mei", b"chen", b"@example"):
        assert name not in lowered, f"{name!r} leaked from the fleet"


def test_message_digest_is_stable_across_whitespace_and_case() -> None:
    assert digest({"role": "user", "content": "Hello  World"}) == digest(
        {"role": "user", "content": "hello world"}
    )
