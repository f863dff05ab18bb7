"""Each advice kind's effect is measured on stored pre-checks (given vs withheld) and a kind that
does not help is retired: no longer given, with the figures in the answer and in an API read."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from apitest_support import ACME, insert

from retrylens.analytics.advice import AgentEvidence, advise, build_advice_book
from retrylens.analytics.advice_effects import advice_effects
from retrylens.analytics.fingerprints import FingerprintStats
from retrylens.analytics.prechecks import PrecheckRow, write_prechecks
from retrylens.api.precheck import advice_kinds, held_out, stored_row
from retrylens.errors import HandedOff, TaskStopped
from retrylens.schemas import ErrorType
from retrylens.sdk import Governor, RetryPolicy
from retrylens.sdk.core.preflight import PrecheckRequest, PrecheckResponse
from retrylens.sdk.text.sanitizer import Failure
from retrylens.sdk.transport.handoff import CallbackChannel
from retrylens.testing import capture_events

pytestmark = pytest.mark.clickhouse
#: simplified retries succeed more often and finish no dearer than other retries (0.005 vs 0.01 USD),
#: and a simplified attempt fails less often (10 %) than two plain ones in a row (40 % × 60 %)
HELPS = AgentEvidence(
    relaxed_ok=36,
    relaxed_n=40,
    other_ok=40,
    other_n=100,
    relaxed_spent=(0.2, 0.2 * 0.005 + 0.0001),
    other_spent=(1.0, 1.0 * 0.01 + 0.001),
    tasks=100,
    succeeded=80,
    spent=0.8,
    first_failed=40,
)


def _record(store, arms: dict[str, list[bool]], *, kind: str = "degrade_first") -> None:
    """Tasks of acme/planner, each pre-checked with ``kind`` given or withheld (the arm), that
    succeed (True) or end with a person (False); their pre-check rows and events are stored."""
    rows = []
    with capture_events() as captured:
        governor = Governor(
            RetryPolicy(caps={"logic": 0}),
            project="acme",
            emit=captured.emit,
            handoff=CallbackChannel(list().append),
        )
        for status, outcomes in arms.items():
            for i, ok in enumerate(outcomes):
                task_id = f"{status}-{i:03d}"
                run = governor.start(f"plan the ledger {i}", agent="planner", task_id=task_id)
                try:
                    with run:
                        attempt = run.begin()
                        if ok:
                            run.succeed(attempt, cost_usd=0.01)
                        else:
                            run.fail(
                                attempt, Failure(ErrorType.LOGIC, "no such ledger"), cost_usd=0.01
                            )
                except (HandedOff, TaskStopped):
                    pass
                rows.append(
                    PrecheckRow(
                        precheck_id=uuid.uuid4().hex,
                        ts=datetime.now(UTC),
                        project="acme",
                        agent="planner",
                        task_id=task_id,
                        input_fingerprint="f" * 32,
                        risk=0.5,
                        model_version="m1",
                        known_bad=False,
                        advice=(kind,) if status == "given" else (),
                        explanation={
                            "advice": [
                                {"advice": kind, "action": "…", "evidence": "…", "status": status}
                            ]
                        },
                    )
                )
    insert(store, captured.events)
    write_prechecks(store, rows)


def test_advice_that_lowers_success_where_given_is_measured_and_retired(seeded) -> None:
    _record(seeded, {"given": [False] * 9 + [True] * 3, "withheld": [True] * 11 + [False]})
    (effect,) = advice_effects(seeded, project="acme")
    assert (effect["advice"], effect["given"], effect["withheld"]) == ("degrade_first", 12, 12)
    assert effect["success"]["value"] == pytest.approx(3 / 12 - 11 / 12)
    assert effect["success"]["hi"] < 0 and effect["handoff"]["lo"] > 0
    assert effect["verdict"] == "hurts" and "lowers success" in effect["words"]

    book = build_advice_book(seeded)
    assert set(book["retired"]) == {"degrade_first"}
    book["agents"]["acme/planner"] = HELPS.as_dict()  # the history alone would give it
    advice = advise(
        0.5,
        FingerprintStats(project="acme", fingerprint="f" * 32),
        project="acme",
        agent="planner",
        book=book,
        human_review_threshold=0.7,
    )
    assert advice.kinds == [] and not advice.recommendation.degrade_first
    (entry,) = advice.evidence
    assert (
        entry["status"] == "retired"
        and "given to 12 tasks vs withheld from 12" in entry["evidence"]
    )


def test_advice_that_helps_or_is_not_yet_judged_stays(seeded) -> None:
    _record(seeded, {"given": [True] * 11 + [False], "withheld": [True] * 6 + [False] * 6})
    _record(seeded, {"given": [True] * 3, "withheld": [False] * 3}, kind="no_retry_of")
    effects = {e["advice"]: e for e in advice_effects(seeded, project="acme")}
    assert (
        effects["degrade_first"]["verdict"] == "helps"
        and effects["degrade_first"]["success"]["lo"] > 0
    )
    assert effects["no_retry_of"]["verdict"] == "too few"
    assert build_advice_book(seeded)["retired"] == {}


def test_the_api_reads_each_kinds_effect_and_what_is_retired(client, seeded) -> None:
    _record(seeded, {"given": [False] * 10 + [True] * 2, "withheld": [True] * 12})
    body = client.get("/v1/projects/acme/prechecks/advice-effects", headers=ACME).json()
    assert body["holdout_share"] == 0.1 and body["model_version"] == "none"
    (effect,) = body["effects"]
    assert effect["advice"] == "degrade_first" and effect["verdict"] == "hurts"
    assert list(body["retired_now"]) == ["degrade_first"] and body["retired_in_force"] == {}
    assert (
        client.get("/v1/projects/globex/prechecks/advice-effects", headers=ACME).status_code == 404
    )


def test_a_fixed_share_of_tasks_is_held_out_the_same_every_time() -> None:
    ids = [f"task-{i}" for i in range(4000)]
    held = [t for t in ids if held_out(t, 0.1)]
    assert 0.08 < len(held) / len(ids) < 0.12 and held == [t for t in ids if held_out(t, 0.1)]
    assert not held_out("", 0.5) and not any(held_out(t, 0.0) for t in ids)


def test_held_out_advice_is_named_but_not_given_nor_stored_as_given() -> None:
    stats = FingerprintStats(project="acme", fingerprint="f" * 32)
    book = {"agents": {"acme/planner": HELPS.as_dict()}}
    advice = advise(
        0.5,
        stats,
        project="acme",
        agent="planner",
        book=book,
        human_review_threshold=0.7,
        holdout=True,
    )
    assert advice.kinds == [] and not advice.recommendation.degrade_first
    assert [(e["advice"], e["status"]) for e in advice.evidence] == [("degrade_first", "withheld")]
    answer = PrecheckResponse(risk=0.5, recommended=advice.recommendation, advice=advice.evidence)
    assert advice_kinds(answer) == []
    row = stored_row(
        PrecheckRequest(project="acme", agent="planner", task_input="x", task_id="t1"),
        answer,
        {"fingerprint": "f" * 32},
    )
    assert row.advice == () and row.explanation["advice"][0]["status"] == "withheld"


def test_the_cli_reads_each_kinds_effect_and_says_which_is_retired(
    seeded, settings, monkeypatch
) -> None:
    from typer.testing import CliRunner

    from retrylens.cli.main import app as cli

    _record(seeded, {"given": [False] * 10 + [True] * 2, "withheld": [True] * 12})
    monkeypatch.setenv("RETRYLENS_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("RETRYLENS_CLICKHOUSE_DSN", settings.clickhouse_dsn)
    monkeypatch.setenv("RETRYLENS_CLICKHOUSE_DATABASE", settings.clickhouse_database)
    shown = CliRunner().invoke(cli, ["advice-effects", "--project", "acme"])
    assert shown.exit_code == 0, shown.output
    assert (
        shown.output.startswith("degrade_first")
        and "RETIRED" in shown.output
        and "lowers success" in shown.output
    )
    data = CliRunner().invoke(cli, ["advice-effects", "--project", "acme", "--json"])
    assert list(__import__("json").loads(data.output)["retired"]) == ["degrade_first"]
