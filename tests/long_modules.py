"""The test modules that take longest, longest first: the order CI's xdist workers get them in.

``tests/conftest.py`` sorts the collected tests by this table (then the other modules by
number of tests); ``tests/foundation/test_long_modules.py`` holds that it names real modules
and every module that declares itself long.
"""

from __future__ import annotations

# The modules that take longest, longest first: xdist hands whole modules to the workers in
# collection order (infra/test.sh: --dist loadfile --no-loadscope-reorder), so these start
# first and the many short modules fill the end: no worker sits idle while another finishes a
# long module it began late. Ranked (session 19) by one whole locked lane with bench/suite_cpu.py's
# plugin (four workers, load 10-12): a module's wall seconds summed over its tests, or 5.4 s
# per CPU second (that run's mean wall per CPU second) if larger, since a module that computes
# holds its worker longer once the other workers compete for the cores. The rest follow by
# number of tests. A heavy module of few tests ordered by size comes last: in that run the
# planted-word A/B (one test, 82 s of wall) was not listed, started at 29:03 and ended the
# lane 34 s after the last other worker went idle; the one-test Kafka-cluster module once did the
# same (session 12). A module with a test allowed more than the suite-wide 300 s is long by
# its own declaration and must be listed (tests/foundation/test_long_modules.py).
LONG_MODULES = (
    "tests/bench/test_bench_smoke.py",  # 764: wall 673 s, CPU 141.2 s, 31 tests
    "tests/api/test_api_schemathesis.py",  # 478: wall 478 s, CPU 64.5 s, 2 tests
    "tests/simulation/test_planted_precheck_ab.py",  # wall 82 s (142 s in a second run, load 18), CPU 12.7 s, 1 test
    "tests/foundation/test_kafka_pipeline.py",  # 247: wall 237 s, CPU 45.7 s, 13 tests
    "tests/dashboard/test_dashboard_hostile_browser.py",  # 245: wall 245 s, CPU 33.2 s, 3 tests
    "tests/analytics/test_analytics_classifier.py",  # 223: wall 154 s, CPU 41.2 s, 9 tests
    "tests/api/test_cli_beside_server.py",  # 214: wall 165 s, CPU 39.6 s, 5 tests
    "tests/foundation/test_demo.py",  # 210: wall 210 s, CPU 32.5 s, 5 tests
    "tests/dashboard/test_dashboard_layout_browser.py",  # 184: wall 141 s, CPU 34.1 s, 10 tests
    "tests/evaluation/test_explore_then_judge_cli.py",  # 147: wall 147 s, CPU 13.2 s, 2 tests
    "tests/api/test_bench_attacks.py",  # 132: wall 132 s, CPU 15.7 s, 1 test
    "tests/analytics/test_analytics_injection.py",  # 130: wall 130 s, CPU 17.2 s, 13 tests
    "tests/evaluation/test_eval_ground_truth.py",  # 128: wall 94 s, CPU 23.6 s, 5 tests
    "tests/analytics/test_truth_harness.py",  # 127: wall 127 s, CPU 17.4 s, 2 tests
    "tests/dashboard/test_dashboard_api_road.py",  # 120: wall 83 s, CPU 22.3 s, 6 tests
    "tests/analytics/test_analytics_levels.py",  # 119: wall 114 s, CPU 22.0 s, 28 tests
    "tests/api/test_api_policies.py",  # 114: wall 95 s, CPU 21.1 s, 7 tests
    "tests/dashboard/test_dashboard_pages.py",  # 112: wall 111 s, CPU 20.8 s, 27 tests
    "tests/api/test_api_precheck.py",  # 109: wall 109 s, CPU 18.8 s, 18 tests
    "tests/foundation/test_kafka_sasl.py",  # 102: wall 102 s, CPU 15.0 s, 11 tests
    "tests/api/test_api_openapi_contract.py",  # 92: wall 79 s, CPU 17.1 s, 15 tests
    "tests/evaluation/test_rules_vectorised.py",  # 92: wall 92 s, CPU 12.9 s, 11 tests
    "tests/analytics/test_fit_threads.py",  # 88: wall 88 s, CPU 14.3 s, 3 tests
    "tests/api/test_api_alert_rules.py",  # 83: wall 73 s, CPU 15.3 s, 13 tests
    "tests/dashboard/test_dashboard_alerts.py",  # 73: wall 69 s, CPU 13.5 s, 5 tests
    "tests/analytics/test_analytics_sealing.py",  # 71: wall 71 s, CPU 12.1 s, 26 tests
    "tests/foundation/test_migrations_frozen.py",  # 68: wall 44 s, CPU 12.6 s, 42 tests
    "tests/api/test_server_heap.py",  # 68: wall 68 s, CPU 7.3 s, 2 tests
    "tests/api/test_api_ingest.py",  # 67: wall 67 s, CPU 10.8 s, 4 tests
    "tests/dashboard/test_dashboard_deprecations.py",  # 65: wall 65 s, CPU 7.2 s, 1 test
    "tests/api/test_api_precheck_monitor.py",  # 65: wall 65 s, CPU 9.8 s, 8 tests
    "tests/evaluation/test_planted_truth.py",  # 64: wall 64 s, CPU 10.1 s, 14 tests
    "tests/foundation/test_kafka_cluster.py",  # 64: wall 41 s, CPU 11.8 s, 1 test
    "tests/api/test_api_serve.py",  # 62: wall 47 s, CPU 11.4 s, 1 test
    "tests/api/test_api_auth.py",  # 59: wall 59 s, CPU 10.2 s, 10 tests
    "tests/api/test_api_precheck_risk_meaning.py",  # 58: wall 54 s, CPU 10.8 s, 4 tests
    "tests/foundation/test_install.py",  # 14 s in that run; its installs from the registry may take minutes
)
