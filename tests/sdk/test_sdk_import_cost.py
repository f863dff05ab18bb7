"""Importing the SDK loads what an agent needs to start, not the governed loop's machinery.

The import cost target (``bench/sdk_import.py``: at most twice ``import tenacity``) is held by
what the README's snippet loads: the task run, its drivers, side-effect protocol and steps
load with the first governed call. A module list, not a timing, so it cannot flake.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: the governed loop's machinery: loads with the first governed call, not with the import
DEFERRED = (
    "retrylens.sdk.core.run",
    "retrylens.sdk.core.drivers",
    "retrylens.sdk.core.effects",
    "retrylens.sdk.core.steps",
    "retrylens.sdk.core.recording",
    "retrylens.sdk.core.run_events",
    "retrylens.sdk.core.stopping",
    "retrylens.sdk.core.attempts",
    "retrylens.sdk.core.shadow",
    "retrylens.sdk.integrations.providers.provider_hook",
    "retrylens.sdk.integrations.providers.provider_send",
    "retrylens.sdk.integrations.providers.provider_calls",
    "retrylens.sdk.integrations.litellm",
    "retrylens.sdk.integrations.providers.observing",
)

_SNIPPET = """
import json, sys
from retrylens.sdk import Governor, build_emitter
emitter = build_emitter()
after_import = sorted(m for m in sys.modules if m.startswith("retrylens."))
events = []
governor = Governor(project="shop", emit=events.append)
calls = []
def flaky():
    calls.append(1)
    if len(calls) < 2:
        raise TimeoutError("slow upstream")
    return "ok"
answer = governor.call(flaky, goal="g", agent="a", dependency="d")
print(json.dumps({"loaded": after_import, "answer": answer, "calls": len(calls),
                  "kinds": [str(e.kind) for e in events]}))
"""


def test_the_readme_snippet_loads_no_loop_machinery_and_the_first_call_still_retries(
    tmp_path: Path,
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _SNIPPET],
        env={"RETRYLENS_DATA_DIR": str(tmp_path), "PATH": ""},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    report = json.loads(out.strip().splitlines()[-1])
    assert [m for m in DEFERRED if m in report["loaded"]] == []
    assert "retrylens.sdk.core.governor" in report["loaded"]  # the snippet did import the governor
    assert report["answer"] == "ok"
    assert report["calls"] == 2  # the lazily loaded loop retried the timeout
    assert len(report["kinds"]) > 2
