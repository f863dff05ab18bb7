"""No deprecated library APIs in our code, and the test run keeps it that way.

The pytest configuration turns a ``DeprecationWarning`` raised from a ``retrylens`` module
into an error (pyproject's ``filterwarnings``); the first test proves the filter really
fires for our modules and only for them. The others reproduce, as a new user meets them,
the deprecations found in the product: the demo's pre-checks went through Starlette's test
client (a ``StarletteDeprecationWarning`` when ``httpx2`` is not installed, as with
``pip install retrylens[server]``), and the reports page embedded its HTML report with
Streamlit's ``components.v1.html`` (removed after 2026-06-01).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _warn_from(module: str) -> None:
    """A ``DeprecationWarning`` issued by code whose module is ``module`` (as a library call's
    ``warnings.warn(..., stacklevel=2)`` attributes it to its caller)."""
    code = compile("import warnings\nwarnings.warn('old API', DeprecationWarning)\n", f"<{module}>", "exec")
    exec(code, {"__name__": module})  # noqa: S102 - the frame's module name is what the filter matches


def test_a_deprecation_warning_raised_by_retrylens_code_fails_the_test() -> None:
    with pytest.raises(DeprecationWarning, match="old API"):
        _warn_from("retrylens.dashboard.page_reports")
    with pytest.raises(DeprecationWarning):
        _warn_from("retrylens")


def test_a_deprecation_warning_of_another_package_is_not_an_error() -> None:
    """Only our code is held to it: a library's own deprecations are its maintainers' to fix."""
    _warn_from("somelibrary.module")  # raises if the filter caught every DeprecationWarning


PREFLIGHT_WITHOUT_HTTPX2 = r"""
import sys, warnings
from pathlib import Path

class NoHttpx2:
    # a fresh `pip install retrylens[server]` has no httpx2 (only the test extras pull it in)
    def find_spec(self, name, path=None, target=None):
        if name == "httpx2" or name.startswith("httpx2."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoHttpx2())
from retrylens.cli.demo_loop import PrecheckLog, api_preflights
from retrylens.cli.road import LocalRoad
from retrylens.config import load_settings
from retrylens.sdk.core.preflight import PrecheckRequest
from retrylens.store import open_store

settings = load_settings(data_dir=Path(sys.argv[1]), kafka_bootstrap_servers="")
store = open_store(settings)
log = PrecheckLog()
warnings.simplefilter("error")
with api_preflights(settings, LocalRoad(settings, store), log) as preflight:
    answer = preflight("shop").check(PrecheckRequest(project="shop", agent="a", task_input="refund order 42"))
print("answered", answer is not None, log.checked)
"""


@pytest.mark.clickhouse
def test_demo_prechecks_reach_the_api_without_a_deprecation_warning(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETRYLENS_", "KAFKA_"))}
    result = subprocess.run([sys.executable, "-c", PREFLIGHT_WITHOUT_HTTPX2, str(tmp_path / "data")],
                            env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "answered True 1"
