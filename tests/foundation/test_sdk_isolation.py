"""The agent side never imports the server side: held by source and by a fresh interpreter.

An agent process that imports the SDK and builds an emitter (the README's snippet) must
load none of the server's libraries; and no module of the SDK (or of the vocabulary it
shares, ``retrylens.schemas`` and ``retrylens.errors``) may name a server package in an
import statement, even a lazy one inside a function.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from source_trees import trees

from retrylens.layers import SERVER_LIBRARIES, SERVER_PACKAGES

REPO = Path(__file__).resolve().parents[2]
#: SDK modules that may import pydantic, httpx, yaml or kafka (only where used, lazily)
#: schemas/wire.py is the consumer's msgspec decoder, kept beside the model it mirrors
AGENT_SIDE_FILES = [
    *sorted((REPO / "sdk").rglob("*.py")),
    *sorted(p for p in (REPO / "schemas").glob("*.py") if p.name != "wire.py"),
    REPO / "retrylens" / "errors.py",
    REPO / "retrylens" / "testing.py",
]


def _imported_modules(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(trees(AGENT_SIDE_FILES)[path]):  # all at once: one child interpreter
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", AGENT_SIDE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_agent_side_source_never_imports_the_server(path: Path) -> None:
    offending = [
        name
        for name in _imported_modules(path)
        if name.startswith(SERVER_PACKAGES) or name.split(".")[0] in SERVER_LIBRARIES
    ]
    assert offending == [], f"{path.relative_to(REPO)} imports server code: {offending}"


def _fresh_interpreter(code: str, tmp_path: Path) -> dict[str, object]:
    env = {**os.environ, "RETRYLENS_DATA_DIR": str(tmp_path / "data")}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_importing_the_sdk_and_building_an_emitter_loads_no_server_library(tmp_path: Path) -> None:
    result = _fresh_interpreter(
        "import json, sys\n"
        "from retrylens.sdk import Governor, build_emitter\n"
        "emitter = build_emitter()\n"
        "print(json.dumps(sorted(sys.modules)))\n",
        tmp_path,
    )
    loaded = set(result)  # type: ignore[arg-type]
    heavy = sorted(
        m
        for m in loaded
        if m.split(".")[0] in SERVER_LIBRARIES or m.startswith(SERVER_PACKAGES)
    )
    assert heavy == []
    # What an agent does not use yet stays unloaded too: validation, HTTP, YAML, Kafka, asyncio.
    assert sorted(loaded & {"pydantic", "httpx", "yaml", "kafka", "asyncio"}) == []


def test_a_governed_call_in_spool_mode_loads_no_server_library(tmp_path: Path) -> None:
    """The whole agent road: govern a call, emit, flush to the spool; still no server code."""
    result = _fresh_interpreter(
        "import json, sys\n"
        "from retrylens.sdk import Governor, build_emitter\n"
        "emitter = build_emitter()\n"
        "governor = Governor(project='shop', emit=emitter.emit)\n"
        "calls = []\n"
        "def flaky():\n"
        "    calls.append(1)\n"
        "    if len(calls) == 1:\n"
        "        raise TimeoutError('slow upstream')\n"
        "    return 'ok'\n"
        "answer = governor.call(flaky, goal='look up order 7', agent='support')\n"
        "emitter.close()\n"
        "print(json.dumps({'answer': answer, 'modules': sorted(sys.modules), "
        "'spooled': emitter.stats['spooled']}))\n",
        tmp_path,
    )
    assert result["answer"] == "ok"
    assert result["spooled"] >= 4  # the full sequence of a retried task reached the spool
    modules = set(result["modules"])  # type: ignore[arg-type]
    assert sorted(m for m in modules if m.split(".")[0] in SERVER_LIBRARIES) == []
    assert sorted(m for m in modules if m.startswith(SERVER_PACKAGES)) == []
