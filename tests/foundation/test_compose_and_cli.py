"""docker-compose.yml is valid Compose and only runs commands the CLI really has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
import yaml
from typer.testing import CliRunner

from retrylens.cli.main import app

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "tests" / "fixtures" / "compose-spec.json"
SHARED_SCHEMA = REPO.parent / "shared" / "data" / "compose" / "compose-spec.json"
runner = CliRunner()


def _compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_compose_file_is_valid_against_the_compose_specification() -> None:
    schema_file = SHARED_SCHEMA if SHARED_SCHEMA.exists() else SCHEMA
    jsonschema.validate(_compose(), json.loads(schema_file.read_text()))


def test_compose_runs_the_whole_stack() -> None:
    services = _compose()["services"]
    assert {"kafka", "clickhouse", "migrate", "consumer", "api", "dashboard"} <= set(services)
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"


def _resolve(command: list[str]) -> tuple[Any, list[str]]:
    node: Any = typer.main.get_command(app)
    args = list(command)
    while hasattr(node, "commands") and args and not args[0].startswith("-"):
        name = args.pop(0)
        assert name in node.commands, f"`retrylens` has no command {name!r}"
        node = node.commands[name]
    return node, args


@pytest.mark.parametrize("service", ["migrate", "consumer", "api", "dashboard"])
def test_every_service_command_exists_in_the_cli(service: str) -> None:
    command = _compose()["services"][service]["command"]
    node, args = _resolve(command)
    known = {opt for param in node.params for opt in param.opts}
    for arg in args:
        if arg.startswith("--"):
            assert arg.split("=")[0] in known, f"{service}: `{' '.join(command)}` has unknown option {arg}"


def test_cli_rejects_bad_arguments_with_a_clear_message() -> None:
    result = runner.invoke(app, ["consume", "--batch-max-rows", "0"])
    assert result.exit_code == 2
    assert "batch-max-rows" in result.output


@pytest.mark.parametrize(
    ("members", "says"),
    [("0", "greater than or equal to 1"), ("-2", "greater than or equal to 1"), ("65", "less than or equal to 64")],
)
def test_consume_refuses_a_member_count_out_of_range(members: str, says: str) -> None:
    result = runner.invoke(app, ["consume", "--members", members])
    assert result.exit_code == 2
    # The panel wraps lines; click words the range per version ("… less than or equal to 64"
    # on the locked one, "… is not in the range 1<=x<=64" on the lowest typer allows).
    text = " ".join(result.output.replace("│", " ").split())
    assert "Invalid value for '--members'" in text, result.output
    assert f"{members} is not in the range 1<=x<=64" in text or says in text, result.output


def test_consume_refuses_a_member_count_out_of_range_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RETRYLENS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RETRYLENS_INGEST_MEMBERS", "0")
    result = runner.invoke(app, ["consume"])
    assert result.exit_code == 2
    assert "configuration error" in result.output and "ingest_members" in result.output


def test_consume_without_a_broker_configured_says_what_to_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RETRYLENS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    result = runner.invoke(app, ["consume"])
    assert result.exit_code == 2
    assert "KAFKA_BOOTSTRAP_SERVERS" in result.output


def test_bad_config_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "retrylens.toml"
    bad.write_text("batch_max_rows = 'many'\n")
    result = runner.invoke(app, ["store", "stats", "--config", str(bad)])
    assert result.exit_code == 2
    assert "batch_max_rows" in result.output and str(bad) in result.output
    broken = tmp_path / "broken.toml"
    broken.write_text("this is = = not toml")
    result = runner.invoke(app, ["store", "stats", "--config", str(broken)])
    assert result.exit_code == 2 and "not valid TOML" in result.output
    result = runner.invoke(app, ["store", "stats", "--config", str(tmp_path / "missing.toml")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_bad_environment_value_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRYLENS_BATCH_MAX_SECONDS", "-1")
    result = runner.invoke(app, ["store", "stats"])
    assert result.exit_code == 2
    assert "batch_max_seconds" in result.output
