"""How an agent authenticates to the RetryLens API (pre-flight checks, policy polling)."""

from __future__ import annotations

import os

AGENT_API_KEY_ENV = "RETRYLENS_AGENT_API_KEY"


def auth_headers(api_key: str | None = None) -> dict[str, str]:
    """The project's ``X-API-Key`` header; ``RETRYLENS_AGENT_API_KEY`` when no key is given."""
    key = api_key or os.environ.get(AGENT_API_KEY_ENV)
    return {"X-API-Key": key} if key else {}
