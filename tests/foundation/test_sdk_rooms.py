"""The SDK's rooms import only downward, and every import path from before the rooms still works.

Rooms, lowest first: ``text`` (what text becomes before it leaves) imports no other room;
``transport`` may import ``text``; ``core`` (the decisions) may import ``text`` and
``transport``; ``integrations`` (one module per framework, ``providers/``) may import every
room. An import that goes upward is a module in the wrong room, or a seam to cut; the
few there are today are written down in :data:`EXCEPTIONS` with why, and an exception
that no longer happens fails too, so the list only shrinks. The graph counts every
import: lazy ones and those under ``TYPE_CHECKING`` too (``tests/import_graph.py``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from import_graph import import_graph

SDK = "retrylens.sdk"
#: each room -> the rooms it may import (itself included)
MAY_IMPORT: dict[str, set[str]] = {
    "text": {"text"},
    "transport": {"text", "transport"},
    "core": {"text", "transport", "core"},
    "integrations": {"text", "transport", "core", "integrations"},
}
#: the front door and the old-path aliases belong to no room: they name every room
OUTSIDE_ROOMS = {SDK, f"{SDK}.old_paths"}

#: (importer, imported) -> why this upward import is there today
EXCEPTIONS: dict[tuple[str, str], str] = {
    (f"{SDK}.text.sanitizer", f"{SDK}.integrations.providers.http_attempts"): (
        "classify() reads a provider's Retry-After and x-should-retry off an HTTP error with the "
        "provider road's parsers (lazy import; Physical only under TYPE_CHECKING); it also finds the "
        "provider failure behind a user's error in http_resends, by name in sys.modules, never importing it"
    ),
    (f"{SDK}.core.governor", f"{SDK}.integrations.providers.provider_hook"): (
        "a Governor installs the provider hook when it is made, so a provider client's own retries "
        "inside a governed call are governed attempts (lazy import)"
    ),
    (f"{SDK}.core.governor", f"{SDK}.integrations.otel"): (
        "a Governor made while OpenTelemetry is configured traces its tasks (lazy import)"
    ),
}


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) >= 3 and parts[2] in MAY_IMPORT else None


def _upward_imports() -> set[tuple[str, str]]:
    graph = import_graph(SDK)
    return {
        (importer, imported)
        for importer, targets in graph.items()
        for imported in targets
        if (a := _room(importer)) and (b := _room(imported)) and b not in MAY_IMPORT[a]
    }


def test_every_sdk_module_lives_in_a_room() -> None:
    homeless = sorted(m for m in import_graph(SDK) if m not in OUTSIDE_ROOMS and _room(m) is None)
    assert homeless == [], "give each a room: sdk/text, sdk/transport, sdk/core or sdk/integrations"


def test_rooms_import_only_downward() -> None:
    unexplained = sorted(_upward_imports() - EXCEPTIONS.keys())
    assert unexplained == [], "an import into a higher room: move the module, or cut the import"


def test_every_exception_still_happens() -> None:
    stale = sorted(EXCEPTIONS.keys() - _upward_imports())
    assert stale == [], "no longer imported upward: delete these from EXCEPTIONS"


def test_the_room_check_sees_an_upward_import() -> None:
    assert _room(f"{SDK}.text.sanitizer") == "text"
    assert _room(f"{SDK}.integrations.providers.provider_hook") == "integrations"
    assert _room(f"{SDK}.old_paths") is None
    assert "integrations" not in MAY_IMPORT["core"] and "core" not in MAY_IMPORT["transport"]
    assert (f"{SDK}.core.governor", f"{SDK}.integrations.otel") in _upward_imports()


def _aliases() -> dict[str, str]:
    from retrylens.sdk.old_paths import ALIASES

    return ALIASES


def test_every_old_path_is_the_same_module_object() -> None:
    different = []
    for old, new in _aliases().items():
        moved = importlib.import_module(new)
        if importlib.import_module(old) is not moved or sys.modules[old] is not moved:
            different.append(old)
        elif moved.__spec__.name != new or moved.__name__ != new:
            different.append(f"{old}: its spec or name became {moved.__spec__.name}")
    assert different == []
    assert len(_aliases()) > 60


def test_an_old_path_imports_by_every_spelling(monkeypatch: pytest.MonkeyPatch) -> None:
    import retrylens.sdk.features  # noqa: F401 - the old path, as a user's code has it
    from retrylens.sdk import features, sanitizer
    from retrylens.sdk.features import task_features
    from retrylens.sdk.text import features as moved

    assert features is moved and retrylens.sdk.features is moved
    assert task_features is moved.task_features
    assert sanitizer is importlib.import_module("retrylens.sdk.text.sanitizer")
    monkeypatch.setattr("retrylens.sdk.features.task_features", "patched")
    assert moved.task_features == "patched"  # a patch by the old path reaches the code


def test_an_old_path_is_never_a_second_file() -> None:
    """A module a late branch adds back at an old path would shadow its alias: it must move."""
    import retrylens.sdk as sdk

    folder = Path(sdk.__path__[0])
    stray = sorted(f"sdk/{old.rpartition('.')[2]}.py" for old in _aliases()
                   if (folder / f"{old.rpartition('.')[2]}.py").exists())
    assert stray == [], "move each into its room (and merge it with the moved module)"
