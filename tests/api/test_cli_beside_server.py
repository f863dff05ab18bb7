"""The CLI beside a running ``retrylens serve``: every store command answers through the server, alike.

chDB lets one process open an embedded store. Each command is run twice on the same data
directory: once with no server (the command opens the store itself), once while a real
``retrylens serve`` owns it (the command goes through its API); the outputs must match,
``--json`` and text alike, and the engine's raw lock error must never reach the user.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_support import running_server

# Each test starts real processes (a store-road run, a server) that a loaded machine starts slowly.
pytestmark = [pytest.mark.clickhouse, pytest.mark.slow, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]

#: Runs CLI commands in ONE process (one store opening for the store road) and prints
#: [[exit code, stdout, stderr], ...]. "{rule}" in an argument is the id the last `alerts add` printed.
RUNNER = """
import json, sys
from typer.testing import CliRunner
from retrylens.cli.main import app
runner, rule, out = CliRunner(), "", []
for argv in json.loads(sys.argv[1]):
    result = runner.invoke(app, [a.replace("{rule}", rule) for a in argv])
    if argv[:2] == ["alerts", "add"] and result.exit_code == 0:
        rule = json.loads(result.stdout)["rule_id"]
    out.append([result.exit_code, result.stdout, result.stderr])
print(json.dumps(out))
"""

COMMANDS: list[list[str]] = [
    ["store", "stats"],
    ["store", "migrate"],
    ["metrics", "--json"],
    ["metrics"],
    ["metrics", "--by", "agent", "--json"],
    ["metrics", "--project", "analytics", "--raw", "--json"],
    ["metrics", "--by", "nonsense"],
    ["groups", "--project", "support", "--json"],
    ["groups", "--project", "support"],
    ["patterns", "--min-support", "3", "--json"],
    ["patterns", "--min-support", "3"],
    ["alerts", "add", "--name", "retries", "--metric", "retry_rate", "--threshold", "0.01",
     "--window-minutes", "100000", "--project", "support"],
    ["alerts", "update", "{rule}", "--threshold", "0.02", "--per", "agent"],
    ["alerts", "list", "--json"],
    ["alerts", "evaluate"],
    ["alerts", "add", "--name", "bad", "--metric", "no_such_metric", "--threshold", "1"],
    ["alerts", "delete", "{rule}"],
    ["alerts", "delete", "no-such-rule"],
    ["rollups", "seal"],
    ["backfill-rollups"],
    ["alerts", "list"],
    ["tasks", "--project", "support", "--limit", "5", "--json"],
    ["tasks", "--project", "support", "--retried", "--limit", "5"],
]


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETRYLENS_") and k != "KAFKA_BOOTSTRAP_SERVERS"}
    return {**env, "RETRYLENS_DATA_DIR": str(data_dir), "COLUMNS": "200", **extra}


def _run(data_dir: Path, commands: list[list[str]], **extra: str) -> list[tuple[int, str, str]]:
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(commands)], env=_env(data_dir, **extra),
                          capture_output=True, text=True, timeout=280, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return [tuple(r) for r in json.loads(done.stdout.splitlines()[-1])]


def _cli(data_dir: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "retrylens.cli.main", *argv], env=_env(data_dir, **extra),
                          capture_output=True, text=True, timeout=280, cwd=REPO)


def _comparable(argv: list[str], stdout: str) -> str:
    """What must be equal on both roads: everything but ids, versions and times the run itself makes."""
    if argv[0] == "alerts" and argv[1] in ("add", "update", "list", "delete") and stdout.startswith("{"):
        data = json.loads(stdout)
        for rule in [data, *data.get("rules", [])]:
            rule.pop("rule_id", None)
            rule.pop("deleted", None)
        return json.dumps(data, sort_keys=True)
    if argv[:2] == ["alerts", "evaluate"]:
        made = ("rule_id", "at", "dedup_key", "fired_at", "window", "rule")  # ids and times of this run
        return json.dumps([{k: v for k, v in s.items() if k not in made} for s in json.loads(stdout)])
    if argv[0] in ("rollups", "backfill-rollups"):
        return json.dumps(sorted(json.loads(stdout)))
    return stdout


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose store holds a small recorded fleet (written with no server running)."""
    folder = tmp_path_factory.mktemp("cli-beside-server")
    seeded = _cli(folder, "demo", "--tasks", "100", "--seed", "5", "--learn-share", "0", "--json")
    assert seeded.returncode == 0, seeded.stderr[-3000:]
    assert json.loads(seeded.stdout)["events_stored"] > 0
    return folder


@pytest.fixture(scope="module")
def store_road(data_dir: Path) -> list[tuple[int, str, str]]:
    return _run(data_dir, COMMANDS)


@pytest.fixture(scope="module")
def server(data_dir: Path, store_road: list[tuple[int, str, str]]) -> Iterator[str]:
    # No periodic evaluation during the test: `alerts evaluate` must be the one that fires the rule.
    with running_server(data_dir, {"RETRYLENS_MAINTENANCE_INTERVAL_S": "3600"}) as url:
        yield url


def test_every_store_command_prints_the_same_through_the_running_server(
    data_dir: Path, store_road: list[tuple[int, str, str]], server: str
) -> None:
    api_road = _run(data_dir, COMMANDS)
    for argv, (code_store, out_store, err_store), (code_api, out_api, err_api) in zip(
        COMMANDS, store_road, api_road, strict=True
    ):
        assert code_api == code_store, (argv, err_api, err_store)
        assert "Cannot lock file" not in err_api and "DB::Exception" not in err_api, (argv, err_api)
        assert _comparable(argv, out_api) == _comparable(argv, out_store), argv
        assert (code_store == 0) == (argv not in (["metrics", "--by", "nonsense"], COMMANDS[15], COMMANDS[17]))
    listed = json.loads(api_road[13][1])
    assert [(r["name"], r["threshold"], r["per"]) for r in listed["rules"]] == [("retries", 0.02, "agent_name")]
    assert json.loads(api_road[14][1]), "the rule over the whole fleet fires"
    assert "unknown metric 'no_such_metric'" in api_road[15][2]
    # a refused argument is blamed on the argument on both roads (the server's 422 included)
    for road in (store_road, api_road):  # the last line: the runner's stderr may hold httpx's log first
        assert road[15][2].strip().splitlines()[-1].startswith("invalid argument: unknown metric"), road[15][2]


def test_train_the_policy_report_and_spool_ingest_beside_the_server(data_dir: Path, server: str) -> None:
    trained = _cli(data_dir, "train", "--json")
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert json.loads(trained.stdout)["version"].startswith("v")
    report = _cli(data_dir, "report", "policies", "--candidates", str(REPO / "examples/policies/aggressive.yaml"),
                  "--replicates", "50", "--out", str(data_dir / "report-through-server"))
    assert report.returncode == 0, report.stderr[-2000:]
    assert Path(json.loads(report.stdout)["html"]).is_file()
    assert "DB::Exception" not in trained.stderr + report.stderr
    spool = _cli(data_dir, "ingest-spool")  # the server drains the spools itself
    assert spool.returncode == 0 and json.loads(spool.stdout)["ingested_by"] == server
    assert "ingests the spool itself" in spool.stderr


def test_demo_records_through_the_running_server(data_dir: Path, server: str) -> None:
    before = json.loads(_cli(data_dir, "store", "stats").stdout)["events"]
    done = _cli(data_dir, "demo", "--tasks", "60", "--seed", "9", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["events_stored"] == report["events_emitted"] > 0
    assert report["store_held_before"] == before
    assert report["prechecks"]["checked"] > 0 and report["model"]["version"].startswith("v")
    assert Path(report["policy_report"]["html"]).is_file()
    assert json.loads(_cli(data_dir, "store", "stats").stdout)["events"] == before + report["events_stored"]


def test_the_server_announces_itself_only_while_it_runs(tmp_path: Path) -> None:
    with running_server(tmp_path) as url:
        announced = json.loads((tmp_path / "server.json").read_text())
        assert announced["url"] == url and announced["pid"] > 0
    assert not (tmp_path / "server.json").exists()
    # A stale announcement (its process is gone) is ignored: the command opens the store itself.
    (tmp_path / "server.json").write_text(json.dumps({"url": url, "pid": 2**22 + 7, "store": ""}))
    stats = _cli(tmp_path, "store", "stats")
    assert stats.returncode == 0 and json.loads(stats.stdout) == {"events": 0, "rows": 0}, stats.stderr


def test_a_store_locked_by_a_server_it_cannot_reach_is_one_clear_line(data_dir: Path, server: str) -> None:
    """The module's server, its announcement set aside for the command (a server start fewer)."""
    announced = data_dir / "server.json"
    aside = announced.rename(data_dir / "server.json.aside")  # nothing announces it, and it listens elsewhere
    try:
        locked = _cli(data_dir, "store", "stats", RETRYLENS_API_PORT="9")
    finally:
        aside.rename(announced)
    assert locked.returncode == 1
    assert "owned by another process" in locked.stderr
    assert "DB::Exception" not in locked.stderr and "Cannot lock file" not in locked.stderr, locked.stderr
