"""Which modules must carry a mutation target: every module under the guarantee folders
(they keep or carry data) and the named guarantee modules elsewhere, unless exempt here
with the reason (``tests/foundation/test_mutation_targets.py`` holds the table to it).

A reason says why the module has no target: it holds no logic a test could pin (wiring,
declarations, DDL text), its guarantee is pinned through another target, mutating it needs
a service no fast test has, or, honestly, that its target is still to be written.
"""

from __future__ import annotations

#: Every module below these folders keeps or carries events on their way to the store.
GUARANTEE_FOLDERS: tuple[str, ...] = ("ingest", "store", "sdk/transport")

#: Guarantee modules outside those folders: what is acknowledged, stored or shown as a verdict.
GUARANTEE_MODULES: tuple[str, ...] = (
    # the tenant budgets: a tenant in debt refused, the others untouched, the local token never charged
    "api/cost_budget.py",
    "api/ingest_budget.py",
    "api/measured.py",
    "api/token_buckets.py",
    "api/otlp.py",
    "api/otlp_decode.py",
    "api/precheck_log.py",
    "analytics/advice.py",
    "analytics/advice_book.py",
    "analytics/advice_effects.py",
    "analytics/advice_evidence.py",
    "analytics/advice_segments.py",
    "analytics/alerts.py",
    "analytics/classifier.py",
    "analytics/explain.py",
    "analytics/known_bad_refs.py",
    "analytics/prechecks.py",
    "evaluation/history.py",
    "evaluation/limits.py",
)

_BROKER = "its logic runs only against a Kafka broker; a mutant would need the broker tests (minutes each): "
_DDL = "schema text, frozen once released (tests/foundation/test_migrations_frozen.py) and checked against the live schema"

EXEMPT: dict[str, str] = {
    "analytics/classifier.py": "a statistical model (features, hashing, a fitted logistic regression, the "
    "choice of its settings): a mutant moves its figures, not a rule a line-level test can pin; its guarantee "
    "(the planted words found, calibrated risk on held-out tasks) is measured on planted data "
    "(tests/analytics/test_risk_model_planted_words.py, test_analytics_classifier_validation.py)",
    "sdk/transport/client.py": "the RetryLens API client (moved into the transport room, issue 35): it carries requests to the API, no events to the store",
    "ingest/consumer.py": _BROKER + "what it hands on and commits is the chain target's",
    "ingest/dlq.py": _BROKER + "the dead-letter topic's produce",
    "ingest/encode_pool.py": "process-pool plumbing; the order of its results is pinned by the chain target's poll",
    "ingest/group.py": _BROKER + "consumer-group members as threads",
    "ingest/kafka_clients.py": "client construction from settings: no decision a test could pin without a broker",
    "ingest/metrics.py": "Prometheus metric declarations only",
    "ingest/heap.py": "collects and freezes a consumer process's start-up heap: a speed measure, no data kept or decided "
    "(its effect is measured in bench/ingest.py; tests/foundation/test_ingest_heap.py holds that garbage is collected first)",
    "ingest/priority.py": "reads a thread's niceness (which threads may be niced is its docstring): no data kept, nothing decided (tests/api/test_ingest_threads_apart.py)",
    "sdk/transport/build.py": "wiring: which sink and spool folder an emitter gets",
    "sdk/transport/kafka.py": _BROKER + "the acknowledged-prefix count of a produce",
    "sdk/transport/settings.py": "reading settings from the environment: no data kept",
    "store/owner.py": "reads the URL another process announced in server.json, for an error message: no data kept",
    "store/client.py": "opening a connection (chDB or a server): no data logic",
    "store/schema.py": "the live schema's DDL and shared SQL text: " + _DDL,
    "store/sql.py": "identifier filling and parameter binding: every store test runs through it",
    **{
        f"store/migrations/{name}.py": _DDL
        for name in (
            "base", "m0001_events", "m0002_rollups", "m0003_idempotency_keys", "m0004_policies",
            "m0005_sealed_rollups", "m0006_hourly_sealed_rollups", "m0007_handoff_index",
            "m0008_rollup_levels", "m0009_one_counting_event", "m0010_loop_signals", "m0011_prechecks",
        )
    },
}
