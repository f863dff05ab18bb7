"""Which road a store command takes: the store itself, or the server that owns it.

chDB lets one process open an embedded store. While ``retrylens serve`` (or ``up``) runs
on a data directory, it owns the store and announces itself in ``<data_dir>/server.json``
(:mod:`retrylens.api.advert`); a command of the same data directory then sends its
operation to that server (``POST /v1/ops/{name}`` with the local token) instead of failing
on the lock. The same happens when ``RETRYLENS_API_URL`` names a server that answers, or
when the store turns out to be locked by a server that answers at the configured address.
Both roads run the same function (:mod:`retrylens.analytics.operations`), so the command's
output is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from retrylens.config import Settings
from retrylens.errors import ArgumentError, RetryLensError, StoreLockedError
from retrylens.sdk.transport.client import is_healthy

Progress = Callable[[str], None]


class LocalRoad:
    """This process opened the store: operations run here."""

    url: str | None = None

    def __init__(self, settings: Settings, store: Any) -> None:
        self.settings = settings
        self.store = store

    def run(self, name: str, /, progress: Progress | None = None, **params: Any) -> Any:
        from retrylens.analytics import operations
        from retrylens.evaluation import operations as _evaluation_operations  # noqa: F401 - registers its own

        try:
            return operations.run(name, self.store, self.settings, params, progress=progress)
        except (ValueError, TypeError) as exc:
            raise ArgumentError(str(exc)) from None


class RemoteRoad:
    """A running server owns the store: operations run there, with this data directory's local token."""

    store: Any = None

    def __init__(self, settings: Settings, url: str) -> None:
        from retrylens.api.auth import local_token, local_token_path

        self.settings = settings
        self.url = url.rstrip("/")
        token = local_token(settings, create=False)
        if token is None:
            raise RetryLensError(
                f"the RetryLens server at {self.url} owns the store, but its local token "
                f"({local_token_path(settings)}) is not readable here: run this command as the server's user "
                "with the same RETRYLENS_DATA_DIR, or stop the server")
        self.token = token

    def run(self, name: str, /, progress: Progress | None = None, **params: Any) -> Any:
        if progress is not None:
            progress(f"running on the server at {self.url}")
        try:
            response = httpx.post(f"{self.url}/v1/ops/{name}", json=params, headers={"X-API-Key": self.token},
                                  timeout=None)
        except httpx.HTTPError as exc:
            raise RetryLensError(f"the RetryLens server at {self.url} owns the store but did not answer: {exc}") \
                from exc
        if response.status_code == 200:
            return response.json()
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        if response.status_code == 422:
            raise ArgumentError(str(detail))
        raise RetryLensError(f"the RetryLens server at {self.url} answered {response.status_code}: {detail}")


Road = LocalRoad | RemoteRoad


def owning_server(settings: Settings) -> str | None:
    """The URL of a running server that owns ``settings``' embedded store, or ``None``."""
    if not settings.is_embedded_store:
        return None
    from retrylens.api.advert import advertised_url

    url = advertised_url(settings)
    if url is None and settings.api_url and is_healthy(settings.api_url):
        url = settings.api_url.rstrip("/")
    return url


def open_road(settings: Settings) -> Road:
    """The store opened here, or the server that owns it (raises the store's clear lock error if neither)."""
    url = owning_server(settings)
    if url is not None:
        return RemoteRoad(settings, url)
    from retrylens.store import open_store

    try:
        return LocalRoad(settings, open_store(settings))
    except StoreLockedError:
        if not is_healthy(settings.effective_api_url):
            raise
        return RemoteRoad(settings, settings.effective_api_url)


def store_operation(settings: Settings, name: str, /, **params: Any) -> Any:
    """Run store operation ``name`` on whichever road reaches the store.

    A parameter the operation refuses raises :class:`ArgumentError` (exit 2) on either road."""
    return open_road(settings).run(name, **params)
