"""The few settings an agent process needs to emit events, read without pydantic.

An agent must not pay for the server's settings machinery (pydantic-settings, every
server field) just to find its spool folder and broker. These are the same settings, with
the same environment variables, file and precedence as :class:`retrylens.config.Settings`
(``RETRYLENS_CONFIG`` TOML file over the environment over defaults); a test holds the two
readers equal, and the server turns its own settings into these with
:meth:`EmitterSettings.from_settings`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrylens.errors import ConfigError

CONFIG_FILE_ENV = "RETRYLENS_CONFIG"
BOOTSTRAP_ENVS = ("KAFKA_BOOTSTRAP_SERVERS", "RETRYLENS_KAFKA_BOOTSTRAP_SERVERS")

#: Kafka client security settings passed to kafka-python as they are (empty = unset).
KAFKA_SECURITY_FIELDS = (
    "kafka_security_protocol",
    "kafka_sasl_mechanism",
    "kafka_sasl_username",
    "kafka_sasl_password",
    "kafka_ssl_cafile",
    "kafka_ssl_certfile",
    "kafka_ssl_keyfile",
)
KAFKA_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
KAFKA_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def check_kafka_security(security: Mapping[str, str]) -> None:
    """Refuse TLS/SASL settings that kafka-python would reject late or silently ignore.

    A typo in a mechanism, or SASL credentials with a PLAINTEXT protocol, otherwise shows
    up as a producer that never connects (an agent spools forever) or a consumer that
    times out bootstrapping; here it is one :class:`ConfigError` naming the setting.
    """
    protocol = security.get("kafka_security_protocol") or "PLAINTEXT"
    mechanism = security.get("kafka_sasl_mechanism", "")
    if protocol not in KAFKA_SECURITY_PROTOCOLS:
        raise ConfigError(
            f"invalid RetryLens settings: kafka_security_protocol: {protocol!r} is not one of "
            f"{', '.join(KAFKA_SECURITY_PROTOCOLS)}"
        )
    if mechanism and mechanism not in KAFKA_SASL_MECHANISMS:
        raise ConfigError(
            f"invalid RetryLens settings: kafka_sasl_mechanism: {mechanism!r} is not one of "
            f"{', '.join(KAFKA_SASL_MECHANISMS)}"
        )
    sasl = protocol.startswith("SASL_")
    if sasl:
        missing = [name for name in ("kafka_sasl_mechanism", "kafka_sasl_username", "kafka_sasl_password")
                   if not security.get(name)]
        if missing:
            raise ConfigError(
                f"invalid RetryLens settings: kafka_security_protocol {protocol} needs {', '.join(missing)}"
            )
    else:
        stray = [name for name in ("kafka_sasl_mechanism", "kafka_sasl_username", "kafka_sasl_password")
                 if security.get(name)]
        if stray:
            raise ConfigError(
                f"invalid RetryLens settings: {', '.join(stray)} set but kafka_security_protocol is "
                f"{protocol}: use SASL_PLAINTEXT or SASL_SSL, or unset them"
            )
    tls_files = [name for name in ("kafka_ssl_cafile", "kafka_ssl_certfile", "kafka_ssl_keyfile") if security.get(name)]
    if tls_files and protocol not in ("SSL", "SASL_SSL"):
        raise ConfigError(
            f"invalid RetryLens settings: {', '.join(tls_files)} set but kafka_security_protocol is "
            f"{protocol}: use SSL or SASL_SSL"
        )
    for name in tls_files:
        if not Path(security[name]).is_file():
            raise ConfigError(f"invalid RetryLens settings: {name}: no such file: {security[name]}")
    if bool(security.get("kafka_ssl_certfile")) != bool(security.get("kafka_ssl_keyfile")):
        raise ConfigError(
            "invalid RetryLens settings: kafka_ssl_certfile and kafka_ssl_keyfile go together (mutual TLS)"
        )


def default_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/retrylens``, else ``~/.local/share/retrylens``."""
    env = os.environ if environ is None else environ
    return Path(env.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "retrylens"


@dataclass(frozen=True, kw_only=True)
class EmitterSettings:
    """Where an agent's events go: Kafka when ``kafka_bootstrap_servers`` is set, else the spool."""

    data_dir: Path = field(default_factory=default_data_dir)
    spool_dir: Path | None = None
    kafka_bootstrap_servers: str = ""
    kafka_topic: str = "retrylens.events"
    emit_queue_size: int = 10_000
    kafka_security: Mapping[str, str] = field(default_factory=dict)

    @property
    def uses_kafka(self) -> bool:
        return bool(self.kafka_bootstrap_servers)

    @property
    def effective_spool_dir(self) -> Path:
        return self.spool_dir or self.data_dir / "spool"

    @classmethod
    def from_settings(cls, settings: Any) -> EmitterSettings:
        """The emitter part of the server's :class:`retrylens.config.Settings`."""
        security = {name: getattr(settings, name, "") for name in KAFKA_SECURITY_FIELDS}
        return cls(
            data_dir=settings.data_dir,
            spool_dir=settings.spool_dir,
            kafka_bootstrap_servers=settings.kafka_bootstrap_servers,
            kafka_topic=settings.kafka_topic,
            emit_queue_size=settings.emit_queue_size,
            kafka_security={k: v for k, v in security.items() if v},
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EmitterSettings:
        """Read the environment (and the ``RETRYLENS_CONFIG`` file) like the server does."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name in ("data_dir", "spool_dir", "kafka_topic", "emit_queue_size", *KAFKA_SECURITY_FIELDS):
            if env.get(f"RETRYLENS_{name.upper()}"):
                values[name] = env[f"RETRYLENS_{name.upper()}"]
        for var in BOOTSTRAP_ENVS:
            if var in env:
                values["kafka_bootstrap_servers"] = env[var]
                break
        values.update(_file_values(env))
        return cls._parse(values, env)

    @classmethod
    def _parse(cls, values: dict[str, Any], env: Mapping[str, str]) -> EmitterSettings:
        try:
            queue_size = int(values.get("emit_queue_size", 10_000))
        except (TypeError, ValueError):
            raise ConfigError(
                f"invalid RetryLens settings: emit_queue_size: not an integer: "
                f"{values['emit_queue_size']!r}"
            ) from None
        if queue_size < 1:
            raise ConfigError(f"invalid RetryLens settings: emit_queue_size: must be ≥ 1, got {queue_size}")
        security = {k: str(values[k]) for k in KAFKA_SECURITY_FIELDS if values.get(k)}
        if values.get("kafka_bootstrap_servers"):
            check_kafka_security(security)
        return cls(
            data_dir=Path(values["data_dir"]) if values.get("data_dir") else default_data_dir(env),
            spool_dir=Path(values["spool_dir"]) if values.get("spool_dir") else None,
            kafka_bootstrap_servers=str(values.get("kafka_bootstrap_servers", "")),
            kafka_topic=str(values.get("kafka_topic", "retrylens.events")),
            emit_queue_size=queue_size,
            kafka_security=security,
        )


def as_emitter_settings(settings: Any | None) -> EmitterSettings:
    """``settings`` as emitter settings: itself, the server's settings converted, or the env."""
    if settings is None:
        return EmitterSettings.from_env()
    if isinstance(settings, EmitterSettings):
        return settings
    return EmitterSettings.from_settings(settings)


def _file_values(env: Mapping[str, str]) -> dict[str, Any]:
    path = env.get(CONFIG_FILE_ENV)
    if not path:
        return {}
    import tomllib

    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    data = data.get("retrylens", data)
    wanted = {"data_dir", "spool_dir", "kafka_bootstrap_servers", "kafka_topic", "emit_queue_size"}
    return {k: v for k, v in data.items() if k in wanted or k in KAFKA_SECURITY_FIELDS}
