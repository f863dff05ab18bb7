"""Who owns an embedded store: the URL its owner announced in ``<data_dir>/server.json``.

The server that owns an embedded store writes that file (:mod:`retrylens.api.advert`, which
also checks that the owner is alive). The store's own lock error reads it here, without the
liveness check, so that the message names the running server's address rather than the
address the failing command was started with (``retrylens serve --port 8788`` on a store
that a server on 8787 owns must point at 8787).
"""

from __future__ import annotations

import json
from pathlib import Path

ADVERT_FILE = "server.json"


def announced_url(data_dir: Path) -> str | None:
    """The URL in the data directory's announcement, or ``None`` (no file, or not readable)."""
    try:
        url = json.loads((Path(data_dir) / ADVERT_FILE).read_text()).get("url")
    except (OSError, ValueError, AttributeError):
        return None
    return str(url) if url else None
