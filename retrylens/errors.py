"""Every error RetryLens raises on purpose, in one hierarchy.

RetryLensError
├── ConfigError            bad settings, config file or CLI argument
├── StoreError             the ClickHouse store could not do what was asked
│   ├── StoreLockedError   an embedded store is owned by another process
│   └── MigrationError     a schema migration failed
└── IngestError            the event pipeline had to stop
    └── InvalidBurstError  too many invalid messages: the consumer stops instead of
                           draining the topic into the dead-letter queue

Each carries enough context to act on without reading a traceback.
"""

from __future__ import annotations


class RetryLensError(Exception):
    """Base of every deliberate RetryLens error."""


class ConfigError(RetryLensError):
    """Settings, a config file or a command-line argument is invalid."""


class StoreError(RetryLensError):
    """The store could not complete an operation."""


class StoreLockedError(StoreError):
    """The embedded chDB data directory is open in another process."""

    def __init__(self, path: str, api_url: str) -> None:
        super().__init__(
            f"the embedded store at {path} is owned by another process (chDB allows one process "
            f"per data directory). Reach it through that process's API at {api_url} "
            "(set RETRYLENS_API_URL if it listens elsewhere), stop that process, or point "
            "RETRYLENS_CLICKHOUSE_DSN at a ClickHouse server so that every process connects directly."
        )
        self.path = path
        self.api_url = api_url


class MigrationError(StoreError):
    """A migration statement failed; the message names the migration."""


class IngestError(RetryLensError):
    """The ingest pipeline cannot continue."""


class InvalidBurstError(IngestError):
    """The share or run of invalid messages crossed the configured limit."""

    def __init__(self, reason: str, *, topic: str, partition: int, offset: int) -> None:
        super().__init__(
            f"stopping the consumer: {reason} (at {topic}[{partition}]@{offset}). The topic is "
            "not drained into the dead-letter queue; fix the producer, then restart the consumer."
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset
