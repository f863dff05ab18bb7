"""The agent's light settings reader agrees with the server's, and rejects bad input clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrylens.config import load_settings
from retrylens.errors import ConfigError
from retrylens.sdk.transport.settings import EmitterSettings

ENVIRONMENTS = [
    {},
    {"RETRYLENS_DATA_DIR": "/srv/rl"},
    {"RETRYLENS_DATA_DIR": "/srv/rl", "RETRYLENS_SPOOL_DIR": "/fast/spool", "RETRYLENS_EMIT_QUEUE_SIZE": "77"},
    {"KAFKA_BOOTSTRAP_SERVERS": "b1:9092,b2:9092", "RETRYLENS_KAFKA_TOPIC": "agents.events"},
    {"RETRYLENS_KAFKA_BOOTSTRAP_SERVERS": "b3:9092"},
    {
        "KAFKA_BOOTSTRAP_SERVERS": "b1:9093",
        "RETRYLENS_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "RETRYLENS_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
        "RETRYLENS_KAFKA_SASL_USERNAME": "agent",
        "RETRYLENS_KAFKA_SASL_PASSWORD": "s3cret",
    },
]


def _clean(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(("RETRYLENS_", "KAFKA_")):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda e: ",".join(sorted(e)) or "defaults")
def test_agent_settings_read_the_environment_like_the_server(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _clean(monkeypatch, env)
    assert EmitterSettings.from_env() == EmitterSettings.from_settings(load_settings())


def test_agent_settings_read_the_config_file_like_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "retrylens.toml"
    config.write_text('[retrylens]\ndata_dir = "/from/file"\nemit_queue_size = 12\nkafka_topic = "t.file"\n')
    _clean(monkeypatch, {"RETRYLENS_CONFIG": str(config), "RETRYLENS_KAFKA_TOPIC": "t.env"})
    agent = EmitterSettings.from_env()
    assert agent == EmitterSettings.from_settings(load_settings())
    assert (agent.data_dir, agent.emit_queue_size, agent.kafka_topic) == (Path("/from/file"), 12, "t.file")


@pytest.mark.parametrize("value", ["many", "0", "-3"])
def test_a_bad_queue_size_is_a_config_error_naming_the_setting(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clean(monkeypatch, {"RETRYLENS_EMIT_QUEUE_SIZE": value})
    with pytest.raises(ConfigError, match="emit_queue_size"):
        EmitterSettings.from_env()
    with pytest.raises(ConfigError, match="emit_queue_size"):
        load_settings()


def test_a_missing_or_broken_config_file_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _clean(monkeypatch, {"RETRYLENS_CONFIG": str(tmp_path / "absent.toml")})
    with pytest.raises(ConfigError, match="does not exist"):
        EmitterSettings.from_env()
    broken = tmp_path / "broken.toml"
    broken.write_text("data_dir = [unclosed")
    monkeypatch.setenv("RETRYLENS_CONFIG", str(broken))
    with pytest.raises(ConfigError, match="not valid TOML"):
        EmitterSettings.from_env()
