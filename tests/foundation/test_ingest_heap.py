"""The consumer process's start-up heap is frozen after its garbage is collected (ingest/heap.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from retrylens.ingest.heap import settle_startup_heap


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def unfrozen_after() -> Iterator[None]:
    yield
    gc.unfreeze()  # the rest of the test process collects as before


@pytest.mark.usefixtures("unfrozen_after")
def test_garbage_cycles_are_collected_before_the_live_heap_is_frozen() -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    dead = weakref.ref(a)
    del a, b  # a cycle only the cyclic collector frees
    kept = _Node()
    frozen = settle_startup_heap()
    assert dead() is None, "a garbage cycle was frozen instead of collected"
    assert frozen == gc.get_freeze_count() > 0
    assert not any(obj is kept for obj in gc.get_objects()), "a live object is still in a collected generation"
