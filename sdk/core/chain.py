"""cancel_chain: stop a task and every sub-agent working for it, threads and asyncio alike.

Runs register under their chain's root task id. Cancelling sets a flag every run checks
before each attempt (and that cooperative code can poll with ``run.check_cancelled()``),
and cancels registered asyncio tasks in their own loops, thread-safely.
"""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio


def is_async_cancellation(error: BaseException) -> bool:
    """Whether ``error`` is asyncio's ``CancelledError``, without importing asyncio.

    If asyncio was never imported, no asyncio task can have been cancelled.
    """
    asyncio: Any = sys.modules.get("asyncio")
    return asyncio is not None and isinstance(error, asyncio.CancelledError)


class ChainRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled: set[str] = set()
        self._members: defaultdict[str, set[str]] = defaultdict(set)  # root → task ids
        self._root_of: dict[str, str] = {}
        self._async: defaultdict[
            str, list[tuple[asyncio.AbstractEventLoop, asyncio.Task[object]]]
        ] = defaultdict(list)

    def join(self, task_id: str, root: str) -> None:
        with self._lock:
            self._members[root].add(task_id)
            self._root_of[task_id] = root

    def leave(self, task_id: str) -> None:
        with self._lock:
            root = self._root_of.pop(task_id, None)
            if root is not None:
                self._members[root].discard(task_id)
                if not self._members[root]:
                    self._members.pop(root, None)
                    self._async.pop(root, None)

    def attach_current_task(self, task_id: str) -> None:
        """Register the running asyncio task so that a cancel reaches it."""
        import asyncio  # called from coroutines only: loaded already

        task = asyncio.current_task()
        if task is None:
            return
        with self._lock:
            root = self._root_of.get(task_id, task_id)
            self._async[root].append((asyncio.get_running_loop(), task))

    def is_cancelled(self, task_id: str) -> bool:
        if not self._cancelled:  # nothing ever cancelled (the usual case): no lock needed
            return False
        with self._lock:
            return (
                task_id in self._cancelled or self._root_of.get(task_id, task_id) in self._cancelled
            )

    def cancel(self, task_id: str) -> list[str]:
        """Cancel ``task_id``'s whole chain; returns the task ids that were running in it."""
        with self._lock:
            root = self._root_of.get(task_id, task_id)
            self._cancelled.add(root)
            self._cancelled.add(task_id)
            members = sorted(self._members.get(root, ()))
            self._cancelled.update(members)
            tasks = list(self._async.get(root, ()))
        for loop, task in tasks:
            if not task.done():
                loop.call_soon_threadsafe(task.cancel)
        return members
