"""Opening the ClickHouse store: embedded chDB or any ClickHouse server, one code path.

chDB runs the real ClickHouse engine inside this process and locks its data directory,
so only one process may open an embedded store, and one process may open only one
embedded path. Both limits surface here as clear :class:`StoreError` s rather than the
engine's generic messages.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import clickhouse_connect
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from retrylens.config import Settings
from retrylens.errors import StoreError, StoreLockedError
from retrylens.sdk.transport.private_dirs import private_dir

from .owner import announced_url

_clients: dict[str, Client] = {}
_clients_lock = threading.Lock()


def connect(settings: Settings) -> Client:
    """A client for the configured store; embedded clients are shared per process."""
    dsn = settings.effective_dsn
    if not dsn.startswith("chdb://"):
        try:
            return clickhouse_connect.get_client(dsn=dsn, autogenerate_session_id=False)
        except ClickHouseError as exc:
            raise StoreError(f"cannot reach ClickHouse at {dsn}: {exc}") from exc
    with _clients_lock:
        if dsn in _clients:
            return _clients[dsn]
        path = dsn.removeprefix("chdb://")
        private_dir(path)
        try:
            with _engine_stderr() as engine_said:
                client = clickhouse_connect.get_client(dsn=dsn)
        except ClickHouseError as exc:
            text = str(exc)
            if "Cannot lock file" in text or "Another server instance" in text or (
                "Error initializing EmbeddedServer" in text
            ):
                raise StoreLockedError(path, announced_url(settings.data_dir) or settings.effective_api_url) from exc
            if "already initialized with path" in text:
                raise StoreError(
                    f"this process already opened another embedded store; chDB allows one data "
                    f"directory per process, so {path} cannot be opened here"
                ) from exc
            raise StoreError(f"cannot open the embedded store at {path}: {text} {engine_said()}".strip()) from exc
        _clients[dsn] = client
        return client


def connect_apart(settings: Settings) -> Client:
    """A client of the configured store with a connection of its own, for a thread that must
    not queue behind the API's reads (or make them queue behind it).

    clickhouse-connect serialises the calls of one embedded client on a lock (a handle with an
    open stream must not be reused), so the ingest threads' inserts on the API's client made a
    tenant's read wait for another tenant's insert, seconds under a flood. chDB lets a process
    open any number of handles on its one engine (the path must be the one already open, which
    :func:`connect` opens first); each has its own lock, and the engine runs their queries side
    by side (``tests/foundation/test_store_connections.py``). A ClickHouse server client is already
    safe to share across threads (a pool of HTTP connections): it is returned as it is.
    """
    shared = connect(settings)
    dsn = settings.effective_dsn
    if not dsn.startswith("chdb://"):
        return shared
    try:
        return clickhouse_connect.get_client(dsn=dsn)
    except ClickHouseError as exc:
        raise StoreError(f"cannot open another connection to the embedded store at {dsn}: {exc}") from exc


@contextmanager
def _engine_stderr() -> Iterator[Callable[[], str]]:
    """Hold back what the engine writes to the process's stderr while the store opens.

    On a locked store chDB prints its raw ``Code: 76. DB::Exception: Cannot lock file …``
    line straight to file descriptor 2 before raising; the caller turns the exception into
    a clear :class:`StoreLockedError`, so that line must not reach the user. Anything the
    engine printed on a successful open is passed on unchanged; on another failure the
    caller may add it to its message.
    """
    captured = ""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (embedded interpreter, closed fd): nothing to hold back
        yield lambda: ""
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield lambda: captured
        except BaseException:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured = sink.read().decode(errors="replace").strip()
            raise
        os.dup2(saved, 2)
        os.close(saved)
        sink.seek(0)
        passed_on = sink.read()
        if passed_on:
            os.write(2, passed_on)
