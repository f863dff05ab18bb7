"""Who is asking: API keys per project, and the 401/404 rules.

A request presents a key in ``X-API-Key`` or ``Authorization: Bearer``. No key or an
unknown key → 401. A known key may read only its own projects: any other project answers
404 exactly as a project that does not exist would, so a key cannot probe which projects
are there (never 403).

Besides the configured project keys there is a **local token**: a random secret the
server keeps in ``<data_dir>/api-token`` (mode 0600) that reads every project. Processes of
the same user on the same machine (the dashboard on an embedded store, the CLI) use it, so
the product works out of the box without configuring keys, and nobody without access to
the data directory can use it.
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import TYPE_CHECKING

from fastapi import Depends, HTTPException, Path, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from retrylens.config import Settings
from retrylens.sdk.transport.private_dirs import private_dir

LOCAL_TOKEN_FILE = "api-token"
PROJECT_PATTERN = r"^[^\x00-\x1f/]{1,256}$"

api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="The project's API key.")
bearer = HTTPBearer(auto_error=False, description="The project's API key as a bearer token.")


@dataclass(frozen=True)
class Principal:
    """The caller: the projects its key may read (``None`` = every project, the local token)."""

    projects: frozenset[str] | None

    def can_read(self, project: str) -> bool:
        return self.projects is None or project in self.projects

if TYPE_CHECKING:
    from retrylens.sdk.transport.client import RetryLensClient


def local_token_path(settings: Settings) -> FilePath:
    return settings.data_dir / LOCAL_TOKEN_FILE


def local_client(settings: Settings, *, timeout: float = 10.0) -> RetryLensClient:
    """A client of this machine's server: the local token if present, else the project keys."""
    from retrylens.sdk.transport.client import RetryLensClient

    token = local_token(settings, create=False)
    return RetryLensClient(settings.effective_api_url, token or settings.api_keys, timeout)


def local_token(settings: Settings, *, create: bool = True) -> str | None:
    """The local all-projects token; created (0600) on first use when ``create``."""
    path = local_token_path(settings)
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        if not create:
            return None
    private_dir(path.parent)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, token.encode())
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return token


class KeyRing:
    """Resolves a presented key to a :class:`Principal` in constant time per key."""

    def __init__(self, project_keys: dict[str, str], admin_token: str | None = None) -> None:
        self._keys = [(project, key.encode()) for project, key in project_keys.items() if key]
        self._admin = admin_token.encode() if admin_token else None

    def resolve(self, presented: str) -> Principal | None:
        candidate = presented.encode()
        projects = frozenset(p for p, key in self._keys if hmac.compare_digest(candidate, key))
        if self._admin is not None and hmac.compare_digest(candidate, self._admin):
            return Principal(None)
        return Principal(projects) if projects else None


async def principal(
    request: Request,
    api_key: str | None = Security(api_key_header),
    credentials: HTTPAuthorizationCredentials | None = Security(bearer),
) -> Principal:
    """The authenticated caller, or 401. Async, though it awaits nothing (a few constant-time
    comparisons): FastAPI sends a sync dependency to a worker thread on every request."""
    key = api_key or (credentials.credentials if credentials else None)
    if not key:
        raise HTTPException(
            401, "missing API key: send it in the X-API-Key header or as Authorization: Bearer <key>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    keyring: KeyRing = request.app.state.keyring
    found = keyring.resolve(key)
    if found is None:
        raise HTTPException(401, "invalid API key", headers={"WWW-Authenticate": "Bearer"})
    return found


def not_found(project: str) -> HTTPException:
    return HTTPException(404, f"project {project!r} not found")


async def project_access(
    project: str = Path(..., pattern=PROJECT_PATTERN, description="Project (tenant) name."),
    who: Principal = Depends(principal),
) -> str:
    """The path's project when the caller may read it; otherwise 404, as if it did not exist
    (async for the same reason as :func:`principal`)."""
    if not who.can_read(project):
        raise not_found(project)
    return project
