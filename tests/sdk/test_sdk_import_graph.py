"""The SDK's modules import each other without cycles, counting every import statement.

Imports under ``TYPE_CHECKING`` and inside functions count too: a cycle hidden in a lazy
import is still two modules that cannot be understood (or loaded) one without the other.
"""

from __future__ import annotations

import pytest
from import_graph import cycles, import_graph

pytestmark = pytest.mark.source_only  # no installed package's version can change it (pyproject.toml, markers)


def test_the_scan_sees_lazy_and_type_checking_imports() -> None:
    graph = import_graph("retrylens.sdk")
    assert "retrylens.sdk.core.verdicts" in graph["retrylens.sdk.core.run"]  # a plain import
    assert "retrylens.sdk.core.policy" in graph["retrylens.sdk.core.state"]  # under TYPE_CHECKING
    assert "retrylens.sdk.integrations.otel" in graph["retrylens.sdk.core.governor"]  # inside a function
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def test_the_sdk_has_no_import_cycles() -> None:
    assert cycles(import_graph("retrylens.sdk")) == []
