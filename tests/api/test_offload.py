"""The worker process: its answers come back, a worker that dies answers 503 once and is
replaced, and it runs below the server's priority."""

from __future__ import annotations

import asyncio
import os

import pytest
from fastapi import HTTPException

from retrylens.api import offload


def test_a_dead_worker_answers_503_and_the_next_request_gets_a_new_one():
    async def scenario() -> int:
        with pytest.raises(HTTPException) as raised:
            await offload.in_worker(os._exit, 3)  # a worker killed by what it was given
        assert raised.value.status_code == 503
        return await offload.in_worker(abs, -7)

    assert asyncio.run(scenario()) == 7


def test_the_worker_runs_below_the_servers_priority():
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    theirs = asyncio.run(offload.in_worker(os.getpriority, os.PRIO_PROCESS, 0))
    assert theirs >= min(19, ours + offload.WORKER_NICENESS)


def test_a_worker_ends_when_its_server_is_killed():
    """``kill -9`` of the server (the kill -9 tests do it) must not leave its worker running."""
    import signal
    import subprocess
    import sys
    import time

    parent = subprocess.Popen([sys.executable, "-c", (
        "import asyncio, os, time\n"
        "from retrylens.api import offload\n"
        "print(asyncio.run(offload.in_worker(os.getpid)), flush=True)\n"
        "time.sleep(600)\n")], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(worker, signal.SIGKILL)
    raise AssertionError("the worker outlived its server by 30 s")


def test_shutdown_kills_a_worker_still_busy_past_its_bound():
    """A server's shutdown must not wait on whatever the worker is parsing (it had no bound: an
    app's lifespan shutdown once hung past five minutes on a loaded machine)."""
    import time

    offload.warm_up().result(timeout=120)  # the worker is up
    job = offload._executor().submit(time.sleep, 30)
    time.sleep(0.5)  # the job reached the worker
    offload.shutdown(wait_s=0.5)
    assert not (job.done() and job.exception() is None), "shutdown waited for the job to finish"
    assert asyncio.run(offload.in_worker(abs, -3)) == 3  # a later call starts a new worker
