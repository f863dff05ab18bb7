"""No import cycles anywhere in ``retrylens``: the layers read in one direction.

The graph (``tests/import_graph.py``) counts every import, ``TYPE_CHECKING`` and lazy ones
too.
"""

from __future__ import annotations

import pytest
from import_graph import cycles, import_graph

pytestmark = pytest.mark.source_only  # no installed package's version can change it (pyproject.toml, markers)


def test_the_graph_sees_the_project() -> None:
    graph = import_graph()
    assert len(graph) > 150
    assert "retrylens.sdk.core.run" in graph["retrylens.sdk.core.governor"]  # a plain import
    assert "retrylens.sdk.core.policy" in graph["retrylens.sdk.core.state"]  # under TYPE_CHECKING
    assert "retrylens.sdk.integrations.otel" in graph["retrylens.sdk.core.governor"]  # inside a function
    assert "retrylens.store.migrations.m0001_events" not in graph["retrylens.store.migrator"]  # by name


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []
