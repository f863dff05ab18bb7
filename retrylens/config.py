"""Settings for every RetryLens process, from environment variables and an optional TOML file.

Every setting has a default that runs the whole product embedded on one machine (chDB
store, spool instead of Kafka); production points the same code at a Kafka cluster and a
ClickHouse server by environment alone. The README's configuration table is generated from
:func:`settings_table`, so the documentation cannot drift from the code.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from .errors import ConfigError
from .sdk.transport.settings import KAFKA_SECURITY_FIELDS, check_kafka_security, default_data_dir

CONFIG_FILE_ENV = "RETRYLENS_CONFIG"
log = logging.getLogger("retrylens.config")
#: ``RETRYLENS_*`` variables read elsewhere than :class:`Settings` (the dashboard's road and
#: reports folder, the agent's key and policy); a test holds this list to the code's own.
OTHER_ENV_NAMES = frozenset({
    CONFIG_FILE_ENV, "RETRYLENS_DASHBOARD_SOURCE", "RETRYLENS_DASHBOARD_REPORTS_DIR", "RETRYLENS_AGENT_API_KEY",
    "RETRYLENS_POLICY", "RETRYLENS_POLICY_FILE",
    "RETRYLENS_PROVIDER_RETRIES",  # the SDK's provider hook: `client` leaves retries to the provider client
    "RETRYLENS_PROVIDER_HOSTS",  # observe(): more hosts whose plain requests are provider calls
})
#: Variables of the project's own test and build harness, never read by the product.
HARNESS_ENV_PREFIXES = ("RETRYLENS_TEST_", "RETRYLENS_TOOLS_")
_warned: set[str] = set()


class Settings(BaseSettings):
    """All settings; environment variable = ``RETRYLENS_`` + upper-case name unless noted."""

    model_config = SettingsConfigDict(
        env_prefix="RETRYLENS_", extra="forbid", frozen=True, populate_by_name=True
    )

    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where the embedded store, spool and model artifacts live.",
    )
    clickhouse_dsn: str = Field(
        default="",
        description="clickhouse-connect DSN; empty means embedded `chdb:///<data_dir>/chdb`. "
        "Example: `http://default:@localhost:8123`.",
    )
    clickhouse_database: str = Field(
        default="retrylens", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$", description="Database name."
    )
    clickhouse_cluster: str = Field(
        default="",
        pattern=r"^([A-Za-z_][A-Za-z0-9_\-]{0,63})?$",
        description="ClickHouse cluster name; when set, migrations run ON CLUSTER with "
        "Replicated engines and a Distributed `events` table.",
    )
    event_ttl_days: int = Field(default=395, ge=1, description="Row TTL of raw events.")
    bulky_ttl_days: int = Field(
        default=30, ge=1, description="Column TTL of context snapshots and error details."
    )
    dedup_window: int = Field(
        default=10_000, ge=0, description="Inserts remembered for insert_deduplication_token."
    )
    kafka_bootstrap_servers: str = Field(
        default="",
        validation_alias=AliasChoices("KAFKA_BOOTSTRAP_SERVERS", "RETRYLENS_KAFKA_BOOTSTRAP_SERVERS"),
        description="Kafka brokers (env `KAFKA_BOOTSTRAP_SERVERS`); empty means embedded mode.",
    )
    kafka_topic: str = Field(default="retrylens.events", description="Topic of retry events.")
    kafka_dlq_topic: str = Field(default="retrylens.events.dlq", description="Dead-letter topic.")
    kafka_group: str = Field(default="retrylens-ingest", description="Consumer group id.")
    kafka_topic_partitions: int = Field(
        default=6, ge=1, description="Partitions when RetryLens creates the topics (consumer scale-out bound)."
    )
    kafka_replication_factor: int = Field(default=1, ge=1, description="Replication factor of created topics.")
    kafka_security_protocol: str = Field(
        default="",
        pattern=r"^(|PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL)$",
        description="Kafka `security_protocol` of every client (empty = PLAINTEXT).",
    )
    kafka_sasl_mechanism: str = Field(
        default="",
        pattern=r"^(|PLAIN|SCRAM-SHA-256|SCRAM-SHA-512)$",
        description="SASL mechanism when the protocol is SASL_*.",
    )
    kafka_sasl_username: str = Field(default="", description="SASL user name.")
    kafka_sasl_password: str = Field(default="", description="SASL password (prefer the environment or a 0600 config file).")
    kafka_ssl_cafile: str = Field(default="", description="CA bundle that signs the brokers' certificates (TLS).")
    kafka_ssl_certfile: str = Field(default="", description="Client certificate for mutual TLS.")
    kafka_ssl_keyfile: str = Field(default="", description="Client key for mutual TLS.")
    kafka_bootstrap_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="How long server-side Kafka clients (consume, dlq, topic creation) try to connect "
        "and authenticate before failing with an error.",
    )
    project_topics: dict[str, list[str]] = Field(
        default_factory=dict,
        description='Tenant binding, JSON project → topics it may write: `{"acme": ["events.acme"]}`. '
        "When set, `consume` also reads every listed topic and dead-letters an event whose project "
        "is not bound to the topic it arrived on (reason `project_not_bound_to_topic`; such refusals "
        "do not count towards the invalid-burst breaker). Empty = off.",
    )
    batch_max_rows: int = Field(default=5_000, ge=1, le=1_000_000, description="Rows per insert.")
    batch_max_seconds: float = Field(default=1.0, gt=0, le=60, description="Max wait before an insert.")
    ingest_workers: int = Field(
        default=0,
        ge=0,
        le=64,
        description="Processes that validate and encode for each consumer (0 = in the consumer itself).",
    )
    ingest_members: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Consumer-group members `retrylens consume` runs as threads of one process, sharing its "
        "store (the embedded store is owned by one process; against a ClickHouse server run more processes).",
    )
    dlq_max_consecutive: int = Field(
        default=500, ge=1, description="Consecutive invalid messages that stop the consumer."
    )
    dlq_max_ratio: float = Field(
        default=0.5, gt=0, le=1, description="Invalid share over the last `dlq_window` that stops it."
    )
    dlq_window: int = Field(default=2_000, ge=10, description="Messages in the invalid-ratio window.")
    emit_queue_size: int = Field(
        default=10_000, ge=1, description="In-memory events before emit() spills to the spool."
    )
    spool_dir: Path | None = Field(default=None, description="Spool folder; default `<data_dir>/spool`.")
    metrics_port: int = Field(default=0, ge=0, le=65535, description="Prometheus port of `consume` (0 = off).")
    api_host: str = Field(default="127.0.0.1", description="Bind address of `retrylens serve`.")
    api_port: int = Field(default=8787, ge=1, le=65535, description="Port of `retrylens serve`.")
    api_keys: dict[str, str] = Field(
        default_factory=dict,
        description='API keys per project, JSON: `{"acme": "secret"}`. Empty = API refuses data requests.',
    )
    api_max_body_bytes: int = Field(default=1_048_576, ge=1024, description="Largest accepted request body.")
    api_max_inflated_bytes: int = Field(
        default=16 * 1_048_576, ge=1024,
        description="Largest compressed request body once inflated (gzip/deflate OTLP): inflation stops and "
        "answers 413 as soon as it passes this.",
    )
    api_ingest_rate_bytes: int = Field(
        default=2 * 1_048_576, ge=0,
        description="Per API key: the bytes a second of request bodies it may send to /v1/events and /v1/traces "
        "once its burst is spent; past it they answer 429 with Retry-After (0: no limit; the local token is never "
        "limited).",
    )
    api_ingest_burst_bytes: int = Field(
        default=8 * 1_048_576, ge=1024,
        description="Per API key: the bytes of ingest request bodies it may send at once before "
        "api_ingest_rate_bytes applies.",
    )
    api_ingest_cpu_share: float = Field(
        default=0.05, ge=0,
        description="Per project: the CPU seconds a second (a share of one core) the server may spend parsing, "
        "mapping and judging its OTLP exports once its burst is spent; past it its ingest requests answer 429 "
        "with Retry-After, other projects unaffected (0: no limit; the local token is never limited). Raise it "
        "on a server with more cores or one tenant.",
    )
    api_ingest_cpu_burst_s: float = Field(
        default=0.5, gt=0,
        description="Per project: the CPU seconds of OTLP intake work it may cost at once before "
        "api_ingest_cpu_share applies.",
    )
    otlp_memory_bytes: int = Field(
        default=32 * 1_048_576, ge=65_536,
        description="Per project: the most memory the spans of its unfinished OTLP traces may hold; beyond it "
        "the project's least recently used traces are forgotten (never another project's).",
    )
    otlp_prices: dict[str, tuple[float, float]] = Field(
        default={},
        description='USD per million input/output tokens per model, for spans sent to /v1/traces: `{"gpt-4o": [2.5, 10]}`.',
    )
    human_review_threshold: float = Field(
        default=0.7, ge=0, le=1, description="Pre-check risk from which one earlier permanent failure of the same input is enough to advise human review before spending (a risk alone never is)."
    )
    advice_holdout_share: float = Field(
        default=0.1, ge=0, le=0.5, description="Share of pre-checked tasks (by a hash of the task id) from which the advice they are eligible for is withheld, so that each advice kind's effect is measured against them and a kind that does not help is retired."
    )
    alert_webhook_url: str = Field(default="", description="Webhook that `serve` notifies of alerts (empty = log only).")
    alert_webhook_hosts: list[str] = Field(
        default_factory=list,
        description='Hosts (and ports) an alert rule\'s own webhook may reach although they are private or loopback addresses, JSON: `["relay.internal:9000"]`; a host without a port allows ports 80 and 443 only, `host:*` any port. Other rule webhooks must reach public addresses (a project key must not make the server post into its own network).',
    )
    alert_rules_per_project: int = Field(
        default=50, ge=1, le=10_000,
        description="The most alert rules one project may have (a new one beyond it is refused with the reason).",
    )
    alert_delivery_timeout_s: float = Field(
        default=5.0, gt=0, le=120,
        description="How long one webhook post may take; a slower receiver is retried later and delays only its own project's pages.",
    )
    dashboard_url: str = Field(
        default="http://127.0.0.1:8501",
        description="Where the dashboard is reached; alert pages link to its task and alert pages.",
    )
    maintenance_interval_s: float = Field(
        default=60.0, gt=0, description="How often `serve` seals rollups and evaluates alert rules."
    )
    api_url: str = Field(
        default="", description="Where other processes reach the server; default http://api_host:api_port."
    )

    @field_validator("api_keys")
    @classmethod
    def _no_empty_key(cls, value: dict[str, str]) -> dict[str, str]:
        empty = sorted(project for project, key in value.items() if not key.strip())
        if empty:
            raise ValueError(f"the key of project(s) {', '.join(map(repr, empty))} is empty; an empty key could "
                             "never authenticate: give each project a secret")
        return value

    @field_validator("clickhouse_dsn")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if value and not value.startswith(("chdb://", "http://", "https://", "clickhouse://", "clickhouses://")):
            raise ValueError("must start with chdb://, http://, https:// or clickhouse://")
        return value

    @model_validator(mode="after")
    def _kafka_security_consistent(self) -> Settings:
        if self.kafka_bootstrap_servers:
            try:
                check_kafka_security({name: getattr(self, name) for name in KAFKA_SECURITY_FIELDS})
            except ConfigError as exc:
                raise ValueError(str(exc).removeprefix("invalid RetryLens settings: ")) from None
        if self.project_topics:
            from .ingest.binding import parse_project_topics  # a server module; config stays light

            try:
                parse_project_topics(self.project_topics, event_topic=self.kafka_topic, dlq_topic=self.kafka_dlq_topic)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return self

    @property
    def effective_dsn(self) -> str:
        return self.clickhouse_dsn or f"chdb://{(self.data_dir / 'chdb').resolve()}"

    @property
    def is_embedded_store(self) -> bool:
        return self.effective_dsn.startswith("chdb://")

    @property
    def uses_kafka(self) -> bool:
        return bool(self.kafka_bootstrap_servers)

    @property
    def effective_spool_dir(self) -> Path:
        return self.spool_dir or self.data_dir / "spool"

    @property
    def effective_api_url(self) -> str:
        return self.api_url or f"http://{self.api_host}:{self.api_port}"


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from env, then the TOML file (``RETRYLENS_CONFIG``), then ``overrides``.

    Raises :class:`ConfigError` naming the bad field instead of a pydantic traceback.
    """
    path = config_file or (Path(os.environ[CONFIG_FILE_ENV]) if os.environ.get(CONFIG_FILE_ENV) else None)
    file_values: dict[str, Any] = {}
    if path is not None:
        try:
            file_values = tomllib.loads(path.read_text())
        except FileNotFoundError as exc:
            raise ConfigError(f"config file {path} does not exist") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
        file_values = file_values.get("retrylens", file_values)
    _check_api_keys_json(os.environ.get("RETRYLENS_API_KEYS"))
    warn_unknown_env()
    try:
        return Settings(**{**file_values, **overrides})
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source=str(path) if path else "environment")) from exc
    except SettingsError as exc:  # an environment value that is not the JSON its field needs
        cause = f": {exc.__cause__}" if exc.__cause__ else ""
        raise ConfigError(f"invalid RetryLens settings (environment): {exc}{cause}") from exc


def _describe(exc: ValidationError, *, source: str) -> str:
    problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {_hint(e)}" for e in exc.errors())
    return f"invalid RetryLens settings ({source}): {problems}"


def _hint(error: Any) -> str:
    """The error's message; an unknown key also names the closest setting."""
    if error.get("type") == "extra_forbidden" and error.get("loc"):
        close = difflib.get_close_matches(str(error["loc"][0]), list(Settings.model_fields), n=1, cutoff=0.6)
        return f"unknown setting{f'; did you mean {close[0]}?' if close else ''}"
    return str(error["msg"])


def known_env_names() -> frozenset[str]:
    """Every ``RETRYLENS_*`` environment variable the product reads."""
    names = {f"RETRYLENS_{name.upper()}" for name in Settings.model_fields}
    for field in Settings.model_fields.values():
        if isinstance(field.validation_alias, AliasChoices):
            names.update(str(choice) for choice in field.validation_alias.choices)
    return frozenset(names | OTHER_ENV_NAMES)


def unknown_env(environ: dict[str, str] | None = None) -> list[tuple[str, str | None]]:
    """``RETRYLENS_*`` variables set but read by nothing, each with the closest known name."""
    env = os.environ if environ is None else environ
    known = known_env_names()
    found = []
    for name in sorted(env):
        if name.startswith("RETRYLENS_") and name not in known and not name.startswith(HARNESS_ENV_PREFIXES):
            # Compared without the shared prefix, which would make every name look close.
            tails = {known_name.removeprefix("RETRYLENS_"): known_name for known_name in known}
            close = difflib.get_close_matches(name.removeprefix("RETRYLENS_"), sorted(tails), n=1, cutoff=0.6)
            found.append((name, tails[close[0]] if close else None))
    return found


def warn_unknown_env() -> None:
    """Log each unknown ``RETRYLENS_*`` variable once per process: a typo is otherwise ignored silently."""
    for name, close in unknown_env():
        if name not in _warned:
            _warned.add(name)
            hint = f"; did you mean {close}?" if close else ""
            log.warning("unknown environment variable %s (ignored)%s", name, hint)


def _check_api_keys_json(text: str | None) -> None:
    """A project named twice in ``RETRYLENS_API_KEYS`` would silently keep only its last key."""
    if not text:
        return

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen = [name for name, _ in items]
        twice = sorted({name for name in seen if seen.count(name) > 1})
        if twice:
            raise ConfigError(f"invalid RetryLens settings (environment): api_keys: project(s) "
                              f"{', '.join(map(repr, twice))} listed more than once in RETRYLENS_API_KEYS")
        return dict(items)

    try:
        json.loads(text, object_pairs_hook=pairs)
    except ValueError:
        return  # not JSON: the settings' own parsing names it


#: Defaults that depend on the machine, in words (other defaults are shown as the code makes them).
_COMPUTED_DEFAULTS = {
    "data_dir": "$XDG_DATA_HOME/retrylens or ~/.local/share/retrylens",
}


def settings_table() -> list[tuple[str, str, str, str]]:
    """(setting, env var, default, description) rows for the README."""
    rows = []
    for name, field in Settings.model_fields.items():
        env = f"RETRYLENS_{name.upper()}"
        if isinstance(field.validation_alias, AliasChoices):
            env = " / ".join(str(choice) for choice in field.validation_alias.choices)
        default = _COMPUTED_DEFAULTS.get(name) or repr(field.get_default(call_default_factory=True))
        rows.append((name, env, default, field.description or ""))
    return rows
