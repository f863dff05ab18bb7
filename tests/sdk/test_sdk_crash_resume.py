"""A process that dies between recording a side effect's intent and its outcome, resumed.

The key store then holds the effect as ``intended``: nobody knows whether it happened. The
task resumed under the same task id must neither skip the effect (it may never have
happened) nor repeat it blindly (it may have): a tool that takes an ``idempotency_key`` is
called again with the same key (its provider dedupes on it), and a ``verify`` contract asks
whether it happened. The crash is real (the agent process exits inside the tool), the key
store is the SQLite file a user configures, and only the public governor API is used.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

AGENT = textwrap.dedent(
    '''
    import json, os, sys
    from pathlib import Path
    from retrylens.sdk import Governor, SqliteKeyStore

    root, contract, crash = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    ledger = root / "ledger.json"


    def book():
        return json.loads(ledger.read_text()) if ledger.exists() else []


    def provider_charge(order, key=None):
        """The payment provider: dedupes on the idempotency key when it is given one."""
        entries = book()
        for entry in entries:
            if key is not None and entry["key"] == key:
                return entry["charge"]
        if crash == "before_the_effect":
            os._exit(3)
        charge = f"ch_{len(entries) + 1}"
        ledger.write_text(json.dumps(entries + [{"order": order, "key": key, "charge": charge}]))
        if crash == "after_the_effect":
            os._exit(3)
        return charge


    def charged(order):
        return next((e["charge"] for e in book() if e["order"] == order), None)


    sides = []
    g = Governor(
        key_store=SqliteKeyStore(root / "keys.db"),
        emit=lambda event: sides.extend(s.status.value for s in event.side_effects),
    )
    if contract == "idempotency_key":
        @g.side_effect("payments")
        def charge(order, *, idempotency_key):
            return provider_charge(order, idempotency_key)
    else:
        @g.side_effect("payments", verify=charged)
        def charge(order):
            return provider_charge(order)

    result = g.call(lambda: charge("A-17"), goal="charge order A-17", task_id="task-a17")
    print(json.dumps({"result": result, "ledger": book(), "side_effects": sides}))
    '''
)


def _agent(root: Path, contract: str, crash: str) -> subprocess.CompletedProcess[str]:
    script = root / "agent.py"
    script.write_text(AGENT)
    return subprocess.run(
        [sys.executable, str(script), str(root), contract, crash],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("contract", ["idempotency_key", "verify"])
@pytest.mark.parametrize("crash", ["before_the_effect", "after_the_effect"])
def test_a_task_resumed_after_a_crash_between_intent_and_outcome_charges_once(
    tmp_path: Path, contract: str, crash: str
) -> None:
    died = _agent(tmp_path, contract, crash)
    assert died.returncode == 3, died.stderr  # the process really died inside the tool
    with sqlite3.connect(tmp_path / "keys.db") as db:  # the intent outlived the process
        assert db.execute("SELECT status FROM idempotency_keys").fetchall() == [("intended",)]

    resumed = _agent(tmp_path, contract, "no_crash")
    assert resumed.returncode == 0, resumed.stderr
    answer = json.loads(resumed.stdout.strip().splitlines()[-1])
    (entry,) = answer["ledger"]  # charged exactly once, whether or not the crash came after
    assert entry["order"] == "A-17"
    assert answer["result"] == entry["charge"]  # the charge's own result, never None
    assert answer["side_effects"] == ["committed"]
