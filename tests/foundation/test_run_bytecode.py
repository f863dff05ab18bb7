"""The test run (``infra/test.sh``) does not compile the same Python source in every process.

A run starts hundreds of Python processes: two pytest workers, and the CLIs, servers,
demos and fits the tests start. Where ``PYTHONDONTWRITEBYTECODE`` is set (this machine's
default) and the venv was installed without bytecode, each of them compiled numpy,
pandas, FastAPI, ... from source again (the CLI and the server: 5.4 s of CPU to import,
2.6 s with bytecode). These hold what ``infra/test.sh`` does about it; outside it (a
developer's own venv, no ``DEPS``) there is nothing to hold.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif("DEPS" not in os.environ, reason="only the run infra/test.sh builds (it sets DEPS)")


def test_the_venvs_packages_were_compiled_when_it_was_built() -> None:
    import fastapi
    import numpy
    import pandas

    missing = [
        module.__name__
        for module in (numpy, pandas, fastapi)
        if not Path(importlib.util.cache_from_source(module.__file__)).exists()
    ]
    assert missing == [], f"no bytecode for {missing}: build the venv with uv's --compile-bytecode"


def test_the_run_keeps_the_bytecode_it_compiles() -> None:
    assert not sys.flags.dont_write_bytecode, "PYTHONDONTWRITEBYTECODE is set for the test run"
