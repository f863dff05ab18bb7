"""The definitions as their readers look them up (issue 25, mutation testing).

Readers outside the SQL builders (the dashboard's task search, alert rules) take a count
by name; each name must give that count, its condition and its key.
"""

from __future__ import annotations

import json

from retrylens.analytics.definitions import ATTEMPT_KEY, COUNT_NAMES, COUNTS, TASK_KEY, count


def test_every_count_looked_up_by_name_is_that_count_with_its_units_key() -> None:
    for name in COUNT_NAMES:
        found = count(name)
        assert found.name == name
        assert found.key == (ATTEMPT_KEY if found.unit == "attempt" else TASK_KEY)
    assert {c.unit for c in COUNTS} == {"attempt", "task"}
    assert count("calls").key == ATTEMPT_KEY and count("successful_with_retry").key == TASK_KEY


def test_a_count_is_found_by_a_name_read_at_run_time() -> None:
    """Names come from outside too (an alert rule's metric, a query string): not the
    interned literals of the code, so the lookup must compare names, not objects."""
    for name in json.loads(json.dumps(list(COUNT_NAMES))):
        assert count("".join(name)).name == name
