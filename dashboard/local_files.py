"""What the dashboard reads from local files on either road: policy reports and the model.

Both data sources (:mod:`.source` and :mod:`.api_source`) use these, so they live apart
from either: neither source module imports the other at import time.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrylens.config import Settings

REPORTS_DIR_ENV = "RETRYLENS_DASHBOARD_REPORTS_DIR"


@dataclass(frozen=True)
class ModelInfo:
    """The risk model in force: its meta file (metrics, baselines, window) and weights."""

    version: str
    versions: list[str]
    meta: dict[str, Any]
    #: (feature name, weight) of the features seen in recent inputs, largest |weight| first.
    feature_weights: list[tuple[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Report:
    """One policy-evaluation report: its JSON and, when written beside it, its HTML."""

    name: str
    modified: datetime
    data: dict[str, Any]
    html_path: Path | None = None


def default_reports_dir(settings: Settings | None) -> Path | None:
    """``RETRYLENS_DASHBOARD_REPORTS_DIR``, else ``<data_dir>/reports``."""
    if os.environ.get(REPORTS_DIR_ENV):
        return Path(os.environ[REPORTS_DIR_ENV])
    return settings.data_dir / "reports" if settings is not None else None


def read_reports(folder: Path | None, *, limit: int = 50) -> list[Report]:
    """Policy reports (``*.json``, newest first) in ``folder``; unreadable files are skipped."""
    if folder is None or not folder.is_dir():
        return []
    reports = []
    for path in sorted(folder.rglob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[:limit]:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        html = next((p for p in (path.with_suffix(".html"), path.parent / "report.html") if p.is_file()), None)
        reports.append(Report(str(path.relative_to(folder)), datetime.fromtimestamp(path.stat().st_mtime),
                              data, html))
    return reports


def model_info_from_disk(settings: Settings, recent_features: list[dict[str, Any]]) -> ModelInfo | None:
    """The current model's meta and the weights of features seen in ``recent_features``."""
    from retrylens.analytics.model_store import (
        ModelNotFoundError,
        ModelStore,
        load_current_model,
        models_dir,
    )
    from retrylens.analytics.model_weights import feature_weights

    model_store = ModelStore(models_dir(settings))
    try:
        loaded = load_current_model(settings)
    except ModelNotFoundError:
        return None
    weights = feature_weights(loaded.model, recent_features)
    return ModelInfo(loaded.version, model_store.versions(), loaded.meta, weights)
