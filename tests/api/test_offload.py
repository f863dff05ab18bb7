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
