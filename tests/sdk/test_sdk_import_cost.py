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
from typing import Any

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
#: what a governor needs only once made (rules, processors, input features, key store,
#: breakers), on a failure (task state, context hygiene, the classifier) or at a hand-off:
#: loads with ``Governor(...)`` or later, not with the import (issue 35's "SDK import <= 2x
#: tenacity"; each of these was loaded by the import before session 17)
DEFERRED_TO_GOVERNOR = (
    "retrylens.sdk.text.sanitizer",
    "retrylens.sdk.text.features",
    "retrylens.sdk.text.context",
    "retrylens.sdk.text.processors",
    "retrylens.sdk.text.personal",
    "retrylens.sdk.text.refs",
    "retrylens.sdk.text.word_hashes",
    "retrylens.sdk.text.redaction",
    "retrylens.sdk.transport.handoff",
    "retrylens.sdk.core.state",
    "retrylens.sdk.core.policy_chain",
    "retrylens.sdk.core.stop_rules",
    "retrylens.sdk.core.retry_rules",
    "retrylens.sdk.core.verdicts",
    "retrylens.sdk.core.breaker",
    "retrylens.sdk.core.side_effects",
    "retrylens.sdk.core.budget",
)
#: ``import retrylens.sdk`` alone names everything and loads none of it (PEP 562)
BARE_IMPORT_LOADS = ["retrylens", "retrylens.sdk", "retrylens.sdk.old_paths"]

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


def _last_json_line(code: str, tmp_path: Path) -> Any:
    """Run ``code`` in a fresh interpreter (no PATH, its own data dir); its last line as JSON."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"RETRYLENS_DATA_DIR": str(tmp_path), "PATH": ""},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_the_readme_snippet_loads_no_loop_machinery_and_the_first_call_still_retries(
    tmp_path: Path,
) -> None:
    report = _last_json_line(_SNIPPET, tmp_path)
    assert [m for m in DEFERRED if m in report["loaded"]] == []
    assert [m for m in DEFERRED_TO_GOVERNOR if m in report["loaded"]] == []
    assert "retrylens.sdk.core.governor" in report["loaded"]  # the snippet did import the governor
    assert report["answer"] == "ok"
    assert report["calls"] == 2  # the lazily loaded loop retried the timeout
    assert len(report["kinds"]) > 2


def test_importing_the_sdk_alone_loads_only_its_front_door(tmp_path: Path) -> None:
    code = (
        "import json, sys\nimport retrylens.sdk\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('retrylens'))))"
    )
    assert _last_json_line(code, tmp_path) == BARE_IMPORT_LOADS


def test_one_module_of_the_transport_room_does_not_load_the_emitter(tmp_path: Path) -> None:
    """The hand-off channels (and the settings the server reads) load without the emitter,
    the spool and orjson: ``retrylens.sdk.transport`` names those on first use."""
    code = (
        "import json, sys\nimport retrylens.sdk.transport.handoff\n"
        "import retrylens.sdk.transport.settings\n"
        "loaded = [m for m in ('retrylens.sdk.transport.emitter', 'retrylens.sdk.transport.spool',"
        " 'retrylens.sdk.transport.build', 'orjson') if m in sys.modules]\n"
        "from retrylens.sdk.transport import Emitter, EmitterSettings, Spool, build_emitter\n"
        "print(json.dumps([loaded, Emitter.__module__, Spool.__module__, build_emitter.__module__]))"
    )
    loaded, *modules = _last_json_line(code, tmp_path)
    assert loaded == []
    assert modules == [
        "retrylens.sdk.transport.emitter",
        "retrylens.sdk.transport.spool",
        "retrylens.sdk.transport.build",
    ]
