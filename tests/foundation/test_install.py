"""What a new user installs is what we test: the lock, its exports, the Docker image, the SDK alone.

The last test installs ``retrylens`` without extras into a new virtual environment (from
PyPI through uv's cache, as a user's ``pip install retrylens`` would), so the SDK's own
dependency list is proved, not assumed: no server library arrives, the install stays small,
and the README's SDK snippet runs there with no broker, spooling to disk.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: An install subprocess may take up to its own 600 s: its bound, not pytest-timeout's suite-wide 300 s,
#: decides on a loaded machine (two CI runs side by side).
pytestmark = pytest.mark.timeout(900)

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
SDK_INSTALL_LIMIT_MB = 100
SERVER_DISTRIBUTIONS = (
    "pandas",
    "numpy",
    "pyarrow",
    "chdb",
    "clickhouse-connect",
    "streamlit",
    "scikit-learn",
    "fastapi",
    "uvicorn",
    "pydantic-settings",
    "msgspec",
)


def _uv(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "uv", *args], cwd=REPO, capture_output=True, text=True, timeout=600, **kwargs
    )


def test_the_lock_file_matches_pyproject() -> None:
    result = _uv("lock", "--check")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("exported", "extras"), [("requirements/server.txt", ["--extra", "server"]), ("requirements/sdk.txt", [])]
)
def test_exported_requirements_are_the_lock(exported: str, extras: list[str]) -> None:
    result = _uv("export", "--frozen", *extras, "--no-emit-project", "--no-dev", "--quiet")
    assert result.returncode == 0, result.stderr
    body = lambda text: [line for line in text.splitlines() if not line.startswith("#")]  # noqa: E731
    assert body(result.stdout) == body((REPO / exported).read_text()), (
        f"{exported} is stale: re-export it from uv.lock (see the README)"
    )


def test_the_docker_image_installs_the_lock_and_copies_every_package() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "pip install --require-hashes -r requirements/server.txt" in dockerfile
    assert "pip install --no-deps ." in dockerfile
    pyproject = (REPO / "pyproject.toml").read_text()
    mapped = set(re.findall(r'^"retrylens[.\w]*" = "([\w]+)(?:/[\w/]+)?"$', pyproject, re.M))
    copied = set(re.findall(r"^COPY (\w+) \./\1$", dockerfile, re.M))
    assert mapped <= copied, f"the image misses {sorted(mapped - copied)}"


def _site_packages_mb(venv: Path) -> float:
    site = next((venv / "lib").glob("python3*/site-packages"))
    total = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    return total / 1e6


def _readme_sdk_snippet() -> str:
    block = README.split("<!-- sdk-snippet:start -->", 1)[1].split("<!-- sdk-snippet:end -->", 1)[0]
    return block.split("```python", 1)[1].split("```", 1)[0]


def _source_copy(target: Path) -> Path:
    """The distribution's sources (what an sdist holds), so a build never writes into the checkout."""
    pyproject = (REPO / "pyproject.toml").read_text()
    folders = set(re.findall(r'^"retrylens[.\w]*" = "(\w+)', pyproject, re.M))
    for folder in folders:
        shutil.copytree(REPO / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, target / name)
    return target


def test_the_sdk_installs_alone_small_and_runs_the_readme_snippet_without_a_broker(tmp_path: Path) -> None:
    venv = tmp_path / "agent-venv"
    assert _uv("venv", "--quiet", "--python", sys.executable, str(venv)).returncode == 0
    python = venv / "bin" / "python"
    source = _source_copy(tmp_path / "src")
    installed = _uv("pip", "install", "--quiet", "--python", str(python), str(source))
    assert installed.returncode == 0, installed.stderr
    freeze = _uv("pip", "freeze", "--python", str(python)).stdout.lower()
    names = {line.split("==")[0].replace("_", "-") for line in freeze.splitlines() if "==" in line}
    assert names.isdisjoint(SERVER_DISTRIBUTIONS), sorted(names & set(SERVER_DISTRIBUTIONS))
    size = _site_packages_mb(venv)
    assert size < SDK_INSTALL_LIMIT_MB, f"the SDK install is {size:.0f} MB"

    data_dir = tmp_path / "agent-data"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETRYLENS_", "KAFKA_"))}
    env.update(RETRYLENS_DATA_DIR=str(data_dir), PYTHONPATH="")
    script = tmp_path / "agent.py"
    script.write_text(_readme_sdk_snippet())
    ran = subprocess.run(
        [str(python), str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    assert "charged 12.5 for A-17" in ran.stdout
    segments = list((data_dir / "spool").rglob("*.log"))
    assert segments and sum(f.stat().st_size for f in segments) > 0, "nothing reached the spool"
    # The spooled bytes are real events: read them back with the server's own processor.
    from retrylens.ingest.processor import SourceRef, ValidEvent, process
    from retrylens.sdk.transport.spool import Spool

    records = []
    for folder in {segment.parent for segment in segments}:
        records.extend(Spool(folder, writer=False).read(max_records=1000))
    verdicts = [process(r.value, SourceRef("spool:agent", 0, i)) for i, r in enumerate(records)]
    assert verdicts and all(isinstance(v, ValidEvent) for v in verdicts)
    kinds = {v.event.kind.value for v in verdicts}  # type: ignore[union-attr]
    assert "side_effect" in kinds  # the charge went through the governor, keyed


#: extras of developer tools the test run does not install (`make mutate` installs its own;
#: `embeddings` is bench/model_selection.py's measured, not shipped, embedding candidate)
DEVELOPER_EXTRAS = {"mutation", "embeddings"}


def _direct_requirements() -> list[str]:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for name, extra in project["optional-dependencies"].items():
        if name in DEVELOPER_EXTRAS:
            continue
        requirements += [r for r in extra if not r.startswith("retrylens")]
    return requirements


def test_the_installed_dependencies_satisfy_the_declared_ranges_and_lowest_means_the_floors() -> None:
    """Every direct dependency installed here is within its declared range; in CI's
    lowest-deps run (``DEPS=lowest``) each one is exactly its declared lower bound, so no
    floor claims a version the tests never ran on."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import Requirement
    from packaging.version import Version

    lowest = os.environ.get("DEPS") == "lowest"
    problems = []
    for text in _direct_requirements():
        requirement = Requirement(text)
        try:
            installed = Version(version(requirement.name))
        except PackageNotFoundError:
            problems.append(f"{requirement.name} is not installed")
            continue
        if installed not in requirement.specifier:
            problems.append(f"{requirement.name} {installed} is outside {requirement.specifier}")
        floors = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
        if lowest and floors and installed != floors[0]:
            problems.append(f"{requirement.name}: the lowest run has {installed}, the declared floor is {floors[0]}")
    assert problems == []
