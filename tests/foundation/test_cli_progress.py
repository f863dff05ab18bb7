"""The CLI's progress bars fit the terminal: nothing is cut at its edge, however narrow."""

from __future__ import annotations

import pytest

from retrylens.cli.demo_cmds import _progress

LONG = "the same tasks without pre-checks (recorded nowhere)"


@pytest.mark.parametrize("columns", [40, 60, 80])
def test_the_demos_progress_bars_fit_a_narrow_terminal(columns: int, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    with _progress(False) as progress:
        done = progress.add_task(LONG, total=1000)
        progress.update(done, completed=1000)
        progress.add_task("writing the policy report", total=None)
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(len(line) <= columns for line in lines), lines
    assert "…" not in "".join(lines)
    assert "1000/1000" in "".join(lines)  # the counts are never cut
    described = "".join(line.split("━")[0] for line in lines)  # the description column, wrapped or not
    assert "".join(LONG.split()) in "".join(described.split())
