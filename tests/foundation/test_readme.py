"""The README keeps its promises: the two opening commands and the settings table."""

from __future__ import annotations

from pathlib import Path

from retrylens.config import settings_table

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def _opening_commands() -> list[str]:
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("  #")[0].strip() for line in first_block.strip().splitlines()]


def test_readme_opens_with_the_install_and_run_command_and_the_test_command() -> None:
    install_and_run, run_tests = _opening_commands()
    assert "requirements/server.txt" in install_and_run  # the locked, hashed install
    assert install_and_run.endswith("retrylens demo --tasks 2000 --seed 7")
    assert run_tests == "make test"


def test_the_makefile_demo_target_is_the_readme_install_and_run_command() -> None:
    makefile = (REPO / "Makefile").read_text()
    demo = makefile.split("\ndemo:\n", 1)[1].split("\n\n", 1)[0].strip()
    assert demo == _opening_commands()[0]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("make")]
    assert ci == ['make test DEPS=locked', """make test DEPS=lowest PYTEST_ARGS='-m "not browser and not slow and not source_only"'"""]
    assert "DEPS ?= locked" in (REPO / "Makefile").read_text()  # so `make test` is the locked run


def test_settings_table_in_the_readme_is_current() -> None:
    table = README.split("<!-- settings-table:start -->", 1)[1].split("<!-- settings-table:end -->", 1)[0]
    expected = [f"| `{n}` | `{e}` | `{d}` | {desc} |" for n, e, d, desc in settings_table()]
    rows = [line for line in table.strip().splitlines()[2:]]
    assert rows == expected


def test_every_default_in_the_settings_table_is_a_value_not_a_placeholder() -> None:
    """A setting whose default is built by a factory (``default_factory=list``) shows what the
    factory makes (``[]``), not pydantic's placeholder for "no default value"."""
    defaults = {name: default for name, _env, default, _desc in settings_table()}
    assert not [name for name, default in defaults.items() if "Undefined" in default]
    assert defaults["alert_webhook_hosts"] == "[]"
