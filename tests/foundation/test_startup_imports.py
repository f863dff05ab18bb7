"""What a process imports at start: an ingest worker and the command line load only what they need.

Workers are spawned (never forked from a process holding chDB or Kafka sockets), so each
one imports its modules afresh: with pandas, chDB and pyarrow pulled in through
``retrylens.store``'s package init, a worker took 7–8 s to start on a loaded 2-core
machine instead of ~1 s, and a short run with ``ingest_workers`` spent most of its time
waiting for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("pandas", "chdb", "pyarrow", "clickhouse_connect", "sklearn")


def test_the_workers_function_loads_without_the_stores_engine_or_pandas() -> None:
    code = (
        "import sys, json; from retrylens.ingest.encode_pool import encode_chunk; "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert loaded == []


def test_the_store_package_still_offers_its_names() -> None:
    import retrylens.store as store

    assert {store.EventStore.__name__, store.open_store.__name__, store.connect.__name__} == {
        "EventStore", "open_store", "connect"
    }


def test_the_command_line_starts_without_the_model_and_replay_libraries() -> None:
    """``retrylens --help``, ``consume`` and ``api`` do not load scikit-learn or pandas:
    loading them took 17–22 s of a 2-core machine at load 9 (6–7 s without), and every
    consumer process carried them. The commands that need them import them when run."""
    code = (
        "import sys, json; import retrylens.cli.main; "
        "print(json.dumps([m for m in ('sklearn', 'pandas', 'scipy') if m in sys.modules]))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert loaded == []


def test_an_embedded_server_and_the_command_line_never_import_kafka_python() -> None:
    """kafka-python takes seconds to import and warns (DeprecationWarning) on import: a server
    with an embedded store and no Kafka, and the CLI beside it, must never load it."""
    code = (
        "import sys, json; import retrylens.cli.main, retrylens.api.server, retrylens.api.app, "
        "retrylens.ingest.spool_ingestor, retrylens.cli.demo_loop; "
        "print(json.dumps(sorted(m for m in sys.modules if m == 'kafka' or m.startswith('kafka.'))[:5]))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETRYLENS_", "KAFKA_"))}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert json.loads(done.stdout) == []
