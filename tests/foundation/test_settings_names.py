"""A misspelt setting is named at start-up with the closest valid name; unusable API keys are refused."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from retrylens.config import HARNESS_ENV_PREFIXES, known_env_names, load_settings, unknown_env
from retrylens.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def _cli(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("RETRYLENS_")}
    return subprocess.run([sys.executable, "-m", "retrylens.cli.main", *argv], capture_output=True, text=True,
                          env={**base, "RETRYLENS_DATA_DIR": str(tmp_path), **env}, timeout=120, cwd=REPO)


def test_a_misspelt_environment_variable_is_named_at_start_with_the_closest_name(tmp_path: Path) -> None:
    done = _cli(tmp_path, "store", "migrate", "--dry-run", RETRYLENS_API_PROT="9000")
    assert done.returncode == 0, done.stderr
    assert "RETRYLENS_API_PROT" in done.stderr and "did you mean RETRYLENS_API_PORT?" in done.stderr


def test_unknown_names_are_found_and_known_ones_are_not() -> None:
    env = {"RETRYLENS_API_PROT": "1", "RETRYLENS_API_PORT": "1", "RETRYLENS_CONFIG": "x",
           "KAFKA_BOOTSTRAP_SERVERS": "x", "RETRYLENS_TEST_KAFKA": "x", "RETRYLENS_QWXJKV": "1", "HOME": "/"}
    assert unknown_env(env) == [("RETRYLENS_API_PROT", "RETRYLENS_API_PORT"), ("RETRYLENS_QWXJKV", None)]


def test_every_retrylens_variable_the_code_reads_is_known() -> None:
    """The list of known names is the code's own: a new variable read anywhere must be added to it."""
    pattern = re.compile(r"[\"'](RETRYLENS_[A-Z0-9_]+)[\"']")
    found = set()
    for folder in ("sdk", "retrylens", "api", "dashboard", "analytics", "ingest", "store", "evaluation", "simulation"):
        for path in (REPO / folder).rglob("*.py"):
            found.update(pattern.findall(path.read_text()))
    found = {name for name in found if not name.startswith(HARNESS_ENV_PREFIXES)}
    assert found - known_env_names() == set()


def test_a_misspelt_config_file_key_names_the_closest_setting(tmp_path: Path) -> None:
    config = tmp_path / "retrylens.toml"
    config.write_text("api_prot = 9000\n")
    with pytest.raises(ConfigError, match=r"api_prot: unknown setting; did you mean api_port\?"):
        load_settings(config)


#: `retrylens serve --port 1`, as `python -m retrylens.cli.main` runs it, then which parts of
#: the server stack the refusal loaded.
SERVE_PROBE = (
    "import sys\n"
    "from retrylens.cli.main import app\n"
    "try:\n"
    "    app(['serve', '--port', '1'], prog_name='retrylens')\n"
    "finally:\n"
    "    print(sorted(m for m in ('retrylens.api.server', 'fastapi', 'uvicorn') if m in sys.modules))\n"
)


def test_an_empty_api_key_is_refused_at_start(tmp_path: Path) -> None:
    """Refused before the server stack (FastAPI, uvicorn, the analytics behind the routes)
    is imported: a user's bad configuration is answered at once."""
    with pytest.raises(ConfigError, match="'shop' is empty"):
        load_settings(data_dir=tmp_path, api_keys={"shop": "", "acme": "k"})
    base = {k: v for k, v in os.environ.items() if not k.startswith("RETRYLENS_")}
    env = {**base, "RETRYLENS_DATA_DIR": str(tmp_path), "RETRYLENS_API_KEYS": '{"shop": "  "}'}
    done = subprocess.run([sys.executable, "-c", SERVE_PROBE], capture_output=True, text=True, env=env,
                          timeout=120, cwd=REPO)
    assert done.returncode == 2 and "'shop' is empty" in done.stderr
    assert done.stdout.strip() == "[]", "the server stack was imported before the settings were read"


def test_a_project_listed_twice_in_the_keys_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRYLENS_API_KEYS", '{"shop": "first", "shop": "second"}')
    with pytest.raises(ConfigError, match="'shop' listed more than once"):
        load_settings(data_dir=tmp_path)
