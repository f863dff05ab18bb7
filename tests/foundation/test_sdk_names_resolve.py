"""Every SDK module name and file path written in the repository names something that exists.

Code, tests and docs name SDK modules by import path (``retrylens.sdk.core.policy`` in imports,
monkeypatch targets and docs) and by file (``sdk/core/loop.py`` in mutation targets and the
README). A move or a rename that misses one leaves a name pointing nowhere, and nobody
finds it until a reader follows it (issue 35 item 7 moves the SDK into rooms by a script:
this is what says the script missed nothing). ``bench/RESULTS.md`` is history: its paths
are those of the day they were measured.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("analytics", "api", "bench", "dashboard", "evaluation", "examples", "infra", "ingest",
           "retrylens", "schemas", "sdk", "simulation", "store", "tests")
SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml"}
HISTORY = {REPO / "bench" / "RESULTS.md", Path(__file__).resolve()}  # this file names a missing one

DOTTED = re.compile(r"(?<![\w.])retrylens\.sdk(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./-])sdk/[\w/]+\.py\b")


def _texts() -> dict[Path, str]:
    files = [*REPO.glob("*.md"), *REPO.glob("*.toml")]
    for folder in FOLDERS:
        files += [p for p in (REPO / folder).rglob("*") if p.suffix in SUFFIXES and "__pycache__" not in p.parts]
    return {p: p.read_text(errors="replace") for p in sorted(files) if p not in HISTORY and p.is_file()}


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 1, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


def test_the_scan_reads_names_and_paths() -> None:
    assert DOTTED.findall("see retrylens.sdk.transport.spool.Spool, not opentelemetry.sdk.trace") == [
        "retrylens.sdk.transport.spool.Spool"
    ]
    assert PATH.findall("(`sdk/transport/spool.py`, tests/sdk/test_x.py)") == ["sdk/transport/spool.py"]
    assert _resolves("retrylens.sdk.transport.spool.Spool")
    assert not _resolves("retrylens.sdk.transport.no_such_module")


def test_every_sdk_import_path_written_down_exists() -> None:
    names = {name for text in _texts().values() for name in DOTTED.findall(text)}
    assert len(names) > 50
    assert sorted(n for n in names if not _resolves(n)) == []


def test_every_sdk_file_path_written_down_exists() -> None:
    found = {(path, match) for path, text in _texts().items() for match in PATH.findall(text)}
    assert len(found) > 50
    missing = sorted(f"{path.relative_to(REPO)}: {match}" for path, match in found if not (REPO / match).is_file())
    assert missing == []
