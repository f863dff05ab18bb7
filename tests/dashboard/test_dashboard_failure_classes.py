"""The failure-groups page shows each group's and input's class (issue 11 item 6)."""

from __future__ import annotations

from dashboard_runs import run_page

from retrylens.analytics.failure_groups import failure_groups
from retrylens.analytics.fingerprints import top_failing_fingerprints


def test_groups_and_inputs_show_persistence_and_cause(seeded, seeded_source):
    store, _ = seeded
    expected = failure_groups(store, "shop", limit=25)
    top = top_failing_fingerprints(store, "shop", limit=50)
    app = run_page("groups")
    app.selectbox(key="groups_project").select("shop").run()
    assert not app.exception
    groups = app.dataframe(key="groups_table").value
    assert list(groups["persistence"]) == [g.persistence for g in expected]
    assert list(groups["cause"]) == [g.cause for g in expected]
    assert set(groups["persistence"]) <= {"transient", "permanent", "unknown"}
    inputs = next(f.value for f in app.dataframe if "fingerprint" in f.value.columns)  # plain tables have no key
    assert list(inputs["cause"]) == [s.cause for s in top]
