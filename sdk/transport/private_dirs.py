"""Folders that hold events, models or secrets: created readable by their owner only (0700).

The data directory holds every tenant's events (the spool, the embedded store's files), the
models and the local token. Created with the process's default mode (0755 under the usual
umask), any local user could read them. :func:`private_dir` creates each missing folder of a
path, the parents included, as 0700 (a umask can only narrow that); folders that already
exist are left as their owner set them.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_DIR_MODE = 0o700


def private_dir(path: Path | str) -> Path:
    """``path``, created (with its missing parents) as 0700 if absent; returns it."""
    folder = Path(path)
    missing: list[Path] = []
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        try:
            os.mkdir(candidate, PRIVATE_DIR_MODE)
        except FileExistsError:  # made by another process meanwhile
            pass
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} exists and is not a folder")
    return folder
