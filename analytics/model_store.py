"""Versioned risk-model artifacts on disk, and the current-model pointer the API reloads.

Layout under ``<data_dir>/models/risk``::

    v0001/model.joblib   the fitted :class:`RiskModel`
    v0001/meta.json      version, trained_at, training window, source, feature list,
                         metrics of the model and of both baselines
    CURRENT              the version in force (replaced atomically)

:func:`load_current_model` caches by version and re-reads ``CURRENT`` at most once per
``check_interval_s``, so a server picks up a newly trained model without a restart.
Artifacts are pickles: load only models this deployment trained.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import joblib

from retrylens.config import Settings
from retrylens.errors import ModelNotFoundError
from retrylens.sdk.transport.private_dirs import private_dir

from .classifier import RiskModel

_VERSION = re.compile(r"^v(\d{4,})$")


@dataclass(frozen=True)
class LoadedModel:
    version: str
    model: RiskModel
    meta: dict[str, Any]


def models_dir(settings: Settings) -> Path:
    return settings.data_dir / "models" / "risk"


class ModelStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def versions(self) -> list[str]:
        if not self.root.exists():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and _VERSION.match(p.name))

    def save(self, model: RiskModel, meta: dict[str, Any], *, make_current: bool = True) -> str:
        """Write a new version (never overwrites one) and, by default, point CURRENT at it."""
        private_dir(self.root)
        existing = [int(_VERSION.match(v).group(1)) for v in self.versions()]  # type: ignore[union-attr]
        number = max(existing, default=0) + 1
        while True:
            version = f"v{number:04d}"
            try:
                (self.root / version).mkdir()
                break
            except FileExistsError:
                number += 1
        folder = self.root / version
        full_meta = {"version": version, "trained_at": datetime.now(UTC).isoformat(), **meta}
        model.meta = {**model.meta, **full_meta}
        joblib.dump(model, folder / "model.joblib")
        (folder / "meta.json").write_text(json.dumps(full_meta, indent=2, default=str))
        if make_current:
            self.set_current(version)
        return version

    def set_current(self, version: str) -> None:
        if version not in self.versions():
            raise ModelNotFoundError(f"no model version {version} in {self.root}")
        tmp = self.root / f".CURRENT.{os.getpid()}"
        tmp.write_text(version)
        os.replace(tmp, self.root / "CURRENT")

    def current_version(self) -> str | None:
        try:
            return (self.root / "CURRENT").read_text().strip() or None
        except FileNotFoundError:
            return None

    def meta(self, version: str) -> dict[str, Any]:
        return json.loads((self.root / version / "meta.json").read_text())

    def load(self, version: str) -> LoadedModel:
        path = self.root / version / "model.joblib"
        if not path.exists():
            raise ModelNotFoundError(f"no model version {version} in {self.root}")
        return LoadedModel(version, joblib.load(path), self.meta(version))


_cache: dict[Path, tuple[float, LoadedModel]] = {}
_cache_lock = threading.Lock()


def load_current_model(settings: Settings, *, check_interval_s: float = 2.0) -> LoadedModel:
    """The model in force; reloads when ``CURRENT`` names a new version. Thread-safe."""
    store = ModelStore(models_dir(settings))
    now = time.monotonic()
    with _cache_lock:
        cached = _cache.get(store.root)
        if cached and now - cached[0] < check_interval_s:
            return cached[1]
        version = store.current_version()
        if version is None:
            raise ModelNotFoundError(
                f"no trained risk model in {store.root}; run `retrylens train` (or `retrylens train --traces FILE`)"
            )
        if cached and cached[1].version == version:
            loaded = cached[1]
        else:
            loaded = store.load(version)
        _cache[store.root] = (now, loaded)
        return loaded
