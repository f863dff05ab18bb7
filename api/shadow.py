"""Extension point for shadow-policy and policy-comparison reports (the ``evaluation`` area).

The API does not compute these reports; it serves whatever a provider returns. A provider
is any callable ``(store, where) -> JSON-able`` where ``where`` is the caller's
:class:`~retrylens.analytics.filters.Slice` (its ``project`` is always set and already
authorised). It is found, in order:

1. the ``shadow_reports=`` argument of :func:`retrylens.api.app.create_app`;
2. a provider registered with :func:`register_shadow_reports`;
3. ``retrylens.evaluation.reports.shadow_report`` if that module exists.

With none, ``GET /v1/projects/{project}/shadow-reports`` answers
``{"available": false, "report": null}`` rather than an error, so the dashboard page can
say "not available yet".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from retrylens.analytics.filters import Slice
from retrylens.store import EventStore

ShadowReportProvider = Callable[[EventStore, Slice], Any]
_registered: ShadowReportProvider | None = None


def register_shadow_reports(provider: ShadowReportProvider | None) -> None:
    """Install (or with ``None`` remove) the process-wide provider."""
    global _registered
    _registered = provider


def find_provider(explicit: ShadowReportProvider | None = None) -> ShadowReportProvider | None:
    if explicit is not None:
        return explicit
    if _registered is not None:
        return _registered
    try:
        module = importlib.import_module("retrylens.evaluation.reports")
    except ImportError:
        return None
    provider = getattr(module, "shadow_report", None)
    return provider if callable(provider) else None
