"""The alerts page: rules added, changed and deleted from its forms (store and API roads), and a
firing alert opening the tasks behind it."""

from __future__ import annotations

import pytest
from dashboard_runs import run_page
from fastapi.testclient import TestClient

from retrylens.analytics import alerts as alerting
from retrylens.api.app import create_app
from retrylens.api.auth import local_token
from retrylens.dashboard import source as sources
from retrylens.dashboard.api_source import ApiSource
from retrylens.dashboard.page_alerts import behind_slice
from retrylens.sdk.transport.client import RetryLensClient

pytestmark = pytest.mark.clickhouse


def _no_errors(app) -> None:
    assert not app.exception, [e.value for e in app.exception]
    assert not app.error, [e.value for e in app.error]


def _named(store, name: str) -> list[alerting.AlertRule]:
    return [r for r in alerting.list_rules(store) if r.name == name]


@pytest.fixture
def api_source(seeded):
    store, settings = seeded
    with TestClient(create_app(settings, store)) as http:
        source = ApiSource(RetryLensClient("http://testserver", local_token(settings), http=http), settings=settings)
        sources.use(source)
        yield source
        sources.use(None)


def test_a_firing_alert_lists_the_tasks_behind_it_with_links(seeded, seeded_source):
    store, _ = seeded
    app = run_page("alerts")
    _no_errors(app)
    rule = next(r for r in alerting.list_rules(store) if r.name == "retry rate above 10%")
    state = next(s for s in alerting.alert_states(store, rule.rule_id) if s["status"] == "firing")
    expected = seeded_source.task_costs(behind_slice(rule, state, None), limit=20, offset=0)
    assert expected, "the seeded fleet has retried tasks in the firing window"
    shown = next(f.value for f in app.dataframe if "open" in f.value.columns)  # plain tables carry no key
    assert list(shown["task_id"]) == [t.task_id for t in expected]
    assert shown.iloc[0]["open"] == f"task?project={expected[0].project}&task_id={expected[0].task_id}"


def test_a_rule_is_added_changed_and_deleted_from_the_page(seeded, seeded_source):
    store, _ = seeded
    app = run_page("alerts")
    app.text_input(key="alert_add_name").input("handoffs above 5")
    app.selectbox(key="alert_add_metric").select("handoffs")
    app.number_input(key="alert_add_threshold").set_value(5)
    app.number_input(key="alert_add_window").set_value(60)
    app.button(key="FormSubmitter:alert_add-Add rule").click()
    app.run()
    _no_errors(app)
    [added] = _named(store, "handoffs above 5")
    assert (added.metric, added.op, added.threshold, added.window_minutes) == ("handoffs", ">", 5, 60)
    assert any("added" in s.value for s in app.success)

    app.selectbox(key="alert_edit_pick").select(added.rule_id)
    app.run()
    app.number_input(key=f"alert_edit_threshold_{added.rule_id}").set_value(9)
    app.checkbox(key=f"alert_edit_enabled_{added.rule_id}").uncheck()
    app.button(key=f"FormSubmitter:alert_edit_{added.rule_id}-Save changes").click()
    app.run()
    _no_errors(app)
    [changed] = _named(store, "handoffs above 5")
    assert (changed.rule_id, changed.threshold, changed.enabled) == (added.rule_id, 9, False)

    app.selectbox(key="alert_edit_pick").select(added.rule_id)
    app.run()
    app.button(key=f"FormSubmitter:alert_edit_{added.rule_id}-Delete rule").click()
    app.run()
    _no_errors(app)
    assert _named(store, "handoffs above 5") == []


def test_a_bad_rule_is_named_on_the_page_and_not_stored(seeded, seeded_source):
    store, _ = seeded
    app = run_page("alerts")
    app.text_input(key="alert_add_name").input("bad hook")
    app.text_input(key="alert_add_webhook").input("ftp://example.org")
    app.button(key="FormSubmitter:alert_add-Add rule").click()
    app.run()
    assert any("http://" in e.value for e in app.error)
    assert _named(store, "bad hook") == []


def test_over_the_api_a_rule_is_added_to_the_picked_project(seeded, api_source):
    store, _ = seeded
    app = run_page("alerts", project="shop")
    app.text_input(key="alert_add_name").input("shop retries")
    app.button(key="FormSubmitter:alert_add-Add rule").click()
    app.run()
    _no_errors(app)
    [added] = _named(store, "shop retries")
    assert added.where.project == "shop" and added.metric == "retry_rate"
    app.selectbox(key="alert_edit_pick").select(added.rule_id)
    app.run()
    app.button(key=f"FormSubmitter:alert_edit_{added.rule_id}-Delete rule").click()
    app.run()
    _no_errors(app)
    assert _named(store, "shop retries") == []


def test_the_rules_table_shows_each_rules_slice_in_words_not_as_a_python_literal(seeded, seeded_source):
    store, _ = seeded
    alerting.save_rule(store, alerting.AlertRule(name="shop handoffs", metric="handoff_rate", op=">",
                                                 threshold=0.1, where=alerting.Slice(project="shop")))
    app = run_page("alerts")
    _no_errors(app)
    rules = next(f.value for f in app.dataframe if "slice" in f.value.columns)
    shown = dict(zip(rules["name"], rules["slice"], strict=True))
    assert shown["shop handoffs"] == "project=shop"
    assert not any(c in text for text in rules["slice"] for c in "{}'")
