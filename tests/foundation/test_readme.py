"""The README keeps its promises: the two opening commands and the settings table."""

from __future__ import annotations

from pathlib import Path

from retrylens.config import settings_table

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def test_readme_opens_with_the_install_and_run_command_and_the_test_command() -> None:
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    lines = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert lines[0].startswith("python3 -m pip install -e . && retrylens demo")
    assert lines[1] == "make test"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == "make test"


def test_settings_table_in_the_readme_is_current() -> None:
    table = README.split("<!-- settings-table:start -->", 1)[1].split("<!-- settings-table:end -->", 1)[0]
    expected = [f"| `{n}` | `{e}` | `{d}` | {desc} |" for n, e, d, desc in settings_table()]
    rows = [line for line in table.strip().splitlines()[2:]]
    assert rows == expected
