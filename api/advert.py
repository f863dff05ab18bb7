"""Where a running ``retrylens serve`` can be reached: ``<data_dir>/server.json``.

The server that owns an embedded store writes its URL and process id there once it has
opened the store, and removes the file when it stops. Another process of the same data
directory (the CLI) reads it to go through that server instead of failing on the store's
lock. A file left by a server that died is ignored: its process must be alive and its
``/healthz`` must answer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from retrylens.config import Settings
from retrylens.sdk.transport.private_dirs import private_dir
from retrylens.store.owner import ADVERT_FILE


def advert_path(settings: Settings) -> Path:
    return settings.data_dir / ADVERT_FILE


def reachable_url(settings: Settings, host: str, port: int) -> str:
    """The URL other local processes use: ``api_url`` if set, else the bound address (a wildcard
    bind is reached on the loopback address)."""
    if settings.api_url:
        return settings.api_url.rstrip("/")
    shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    return f"http://{f'[{shown}]' if ':' in shown else shown}:{port}"


def write_advert(settings: Settings, url: str) -> Path:
    """Announce this process as the owner of ``settings``' store (written atomically)."""
    path = advert_path(settings)
    private_dir(path.parent)
    data = {"url": url, "pid": os.getpid(), "store": settings.effective_dsn}
    temporary = path.with_name(f".{ADVERT_FILE}.{os.getpid()}")
    temporary.write_text(json.dumps(data))
    temporary.replace(path)
    return path


def remove_advert(settings: Settings) -> None:
    """Remove the announcement if it is still this process's."""
    path = advert_path(settings)
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def advertised_url(settings: Settings) -> str | None:
    """The URL of a live server that owns ``settings``' store, or ``None``."""
    from retrylens.sdk.transport.client import is_healthy

    try:
        data = json.loads(advert_path(settings).read_text())
        url, pid, store = str(data["url"]), int(data["pid"]), str(data.get("store", ""))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if store and store != settings.effective_dsn:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    return url if is_healthy(url) else None
