"""Extension point for shadow-policy and policy-comparison reports (the ``evaluation`` area).

The API does not compute these reports; it serves whatever a provider returns. A provider
is any callable ``(store, where) -> JSON-able`` where ``where`` is the caller's
:class:`~retrylens.analytics.filters.Slice` (its ``project`` is always set and already
authorised). It is found, in order:

1. the ``shadow_reports=`` argument of :func:`retrylens.api.app.create_app`;
2. a provider registered with :func:`register_shadow_reports`;
3. ``retrylens.evaluation.reports.shadow_report`` if that module exists;
4. else the evaluation area's live shadow comparison,
   :func:`retrylens.evaluation.shadow.compare_shadow` (agreement of live and shadow
   decisions of the project since the slice's ``start``).

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
        provider = getattr(importlib.import_module("retrylens.evaluation.reports"), "shadow_report", None)
        if callable(provider):
            return provider
    except ImportError:
        pass
    try:
        compare = importlib.import_module("retrylens.evaluation.shadow").compare_shadow
    except (ImportError, AttributeError):
        return None

    def live_shadow_comparison(store: EventStore, where: Slice) -> Any:
        return compare(store, project=where.project, since=where.start).as_dict()

    return live_shadow_comparison
