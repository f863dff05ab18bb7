"""Which modules belong to the server side: what an agent process must never load.

One list for the test that holds the SDK apart (``tests/foundation/test_sdk_isolation.py``)
and for the start-up benchmark that reports what the SDK loaded (``bench/sdk_import.py``).
"""

from __future__ import annotations

#: RetryLens packages of the server (``pip install "retrylens[server]"``)
SERVER_PACKAGES: tuple[str, ...] = (
    "retrylens.ingest",
    "retrylens.store",
    "retrylens.analytics",
    "retrylens.api",
    "retrylens.dashboard",
    "retrylens.evaluation",
    "retrylens.simulation",
    "retrylens.cli",
    "retrylens.config",
)
#: top-level import names of the server's third-party libraries
SERVER_LIBRARIES: tuple[str, ...] = (
    "pandas",
    "numpy",
    "pyarrow",
    "chdb",
    "clickhouse_connect",
    "streamlit",
    "sklearn",
    "fastapi",
    "uvicorn",
    "prometheus_client",
    "msgspec",
    "pydantic_settings",
    "typer",
)
