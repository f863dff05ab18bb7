"""Every mutation target and written-down equivalent mutant, one file per area.

Each area's file (``sdk_core``, ``sdk_text``, ``sdk_http``, ``mapping``, ``server``, ``guarantees``, ``alerting``, ``ingest_store``, ``advice``, ``budgets``) defines ``TARGETS`` and
``EQUIVALENT``; this module merges them so that ``infra/mutate.py`` sees one table.
"""

from __future__ import annotations

from . import (
    advice,
    alerting,
    budgets,
    guarantees,
    ingest_store,
    mapping,
    sdk_core,
    sdk_http,
    sdk_text,
    server,
)
from .coverage import EXEMPT, GUARANTEE_FOLDERS, GUARANTEE_MODULES
from .target import Equivalent, Target

_AREAS = (sdk_core, sdk_text, sdk_http, mapping, server, guarantees, alerting, ingest_store, advice, budgets)

TARGETS: dict[str, Target] = {name: t for area in _AREAS for name, t in area.TARGETS.items()}
EQUIVALENT: Equivalent = {key: why for area in _AREAS for key, why in area.EQUIVALENT.items()}

__all__ = ["EQUIVALENT", "EXEMPT", "GUARANTEE_FOLDERS", "GUARANTEE_MODULES", "TARGETS", "Target"]
