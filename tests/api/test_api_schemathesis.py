"""Schemathesis over the OpenAPI spec: generated requests (valid and invalid) never get a 5xx.

Every operation is fuzzed in-process (ASGI) with a bounded number of examples, with the
``acme`` key and ``{project}`` pinned to ``acme`` so that generated filters reach the
queries instead of stopping at the 404 of a random project name, plus a pass with random
project names.
"""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from apitest_support import ACME
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
