"""Schemathesis over the OpenAPI spec: no 5xx, and every answer is one the document declares.

Every operation is fuzzed in-process (ASGI) with a bounded number of examples, with the
``acme`` key and ``{project}`` pinned to ``acme`` so that generated filters reach the
queries instead of stopping at the 404 of a random project name, plus a pass with random
project names. Then the schemathesis CLI runs with ALL its checks (status codes and
bodies declared, Allow headers, auth enforced, ...) against a real ``retrylens serve``.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import schemathesis
from apitest_support import ACME, KEYS
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

pytestmark = [pytest.mark.clickhouse, pytest.mark.slow]
EXAMPLES = {GenerationMode.POSITIVE: 10, GenerationMode.NEGATIVE: 5}


def _fuzz(operation, mode: GenerationMode, pin_project: bool, failures: list[str], statuses: Counter) -> None:
    pinned = {"project": "acme"} if pin_project and "{project}" in operation.path else None
    strategy = operation.as_strategy(generation_mode=mode, path_parameters=pinned)

    @given(case=strategy)
    @hypothesis_settings(max_examples=EXAMPLES[mode], deadline=None, database=None, derandomize=True,
                         suppress_health_check=list(HealthCheck))
    def run(case) -> None:
        response = case.call(headers=ACME)
        statuses[response.status_code // 100] += 1
        if response.status_code >= 500:
            failures.append(f"{case.method} {case.formatted_path} {case.query} -> {response.status_code}: "
                            f"{response.text[:300]}")

    try:
        run()
    except Unsatisfiable:
        pass  # e.g. no invalid request exists for an operation without parameters


def test_generated_requests_never_get_a_server_error(app):
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 28
    failures: list[str] = []
    statuses: Counter = Counter()
    for operation in operations:
        for mode in EXAMPLES:
            _fuzz(operation, mode, pin_project=True, failures=failures, statuses=statuses)
        if "{project}" in operation.path:
            _fuzz(operation, GenerationMode.POSITIVE, pin_project=False, failures=failures, statuses=statuses)
    assert failures == []
    assert statuses[2] >= 100 and statuses[4] >= 100, statuses  # valid requests reached the queries


def test_schemathesis_with_all_checks_passes_against_a_real_server(shared_server, tmp_path):
    cli = Path(sys.executable).with_name("schemathesis")
    url = shared_server
    run = subprocess.run(
        [str(cli), "run", f"{url}/openapi.json", "--checks", "all", "-H", f"X-API-Key: {KEYS['acme']}",
         "--max-examples", "3", "--generation-deterministic", "--no-color", "--request-timeout", "30"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failures" not in run.stdout, run.stdout[-2000:]
