"""How many examples a property test draws, per CI run.

CI's lowest-dependency run (``DEPS=lowest``, exported by ``infra/test.sh``) is there to
prove the declared lower bounds of the direct dependencies. A property whose code under
test is our own (the SDK's rule chains; their vectorised twins on numpy, whose floor is the
locked version) makes the same library calls with every example: the lowest run draws a
fifth of them (still dozens, from every strategy), the locked run all of them. Properties that compare
libraries whose floors differ from the lock (the fast wire decoder against pydantic in
``test_wire.py``) draw their full count in both runs.
"""

from __future__ import annotations

import os

LOWEST_RUN = os.environ.get("DEPS") == "lowest"


def examples(count: int) -> int:
    """``count`` examples, or a fifth of them (at least 20) in CI's lowest-dependency run."""
    return max(20, count // 5) if LOWEST_RUN else count
