"""Instructions per governed call vs tenacity, counted by valgrind: figures no load can move.

``bench/sdk_overhead.py`` times the same calls, but on a shared machine its µs swing with
the scheduler. Instructions executed do not: this script runs each side in a child
interpreter under ``valgrind --tool=cachegrind --cache-sim=no`` twice, with a short and a
long loop of calls after a warm-up, and takes the difference per call, so start-up and
imports cancel out. Sides: ``governed`` (``governor.call`` with the production emitter
into memory, events flushed) and ``tenacity`` (``Retrying``), each on a clean first try
and on one failure then success (zero wait). Ratios are governed / tenacity; the targets
are the timing bench's (first try ≤ 1.0, retried call ≤ 2.0 per attempt).

``--provider`` counts instead a real openai client's call answered at once by an in-process
``httpx2.MockTransport`` (no network): ``plain`` (no hook), ``observed`` (``observe()``),
``governed`` and ``governed_unhooked`` (``governor.call(lambda: client...)`` with the
provider hook and without). Targets (issue 21): what ``observe()`` adds to the call, and
what the hook adds to a governed call, each at most what ``governor.call`` adds to it
without the hook (the first try's overhead on this very call); ``observed_to_first_try``
is the first of these as a share of that overhead.

Run another checkout's code with that checkout's interpreter:
``/other/.venv/bin/python bench/instructions.py --json``. Needs valgrind on PATH.
Usage: ``python bench/instructions.py [--json] [--calls N] [--provider]``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = r"""
import sys
side, path, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
state = {"n": 0}
def ok():
    return 1
def flaky():
    state["n"] += 1
    if state["n"] % 2:
        raise TimeoutError("transient")
    return 1
fn = ok if path == "first" else flaky
if side == "tenacity":
    import tenacity
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_none(), reraise=True
    )
    def once():
        retrying(fn)
    def settle():
        pass
else:
    from retrylens.sdk import Governor, RetryPolicy
    from retrylens.sdk.core.policy import BackoffPolicy
    from retrylens.sdk.transport.emitter import Emitter
    from retrylens.testing import MemorySink
    emitter = Emitter(sink=MemorySink(), spool=None, queue_size=1_000_000)
    governor = Governor(
        RetryPolicy(backoff=BackoffPolicy(base_ms=0, cap_ms=0)), project="bench",
        emit=emitter.emit, sleep=lambda s: None, validate_events=False,
    )
    def once():
        governor.call(fn, goal="bench task", agent="bench")
    def settle():
        emitter.flush(timeout_s=600)
for _ in range(50):
    once()
settle()
for _ in range(calls):
    once()
settle()
"""

_PROVIDER_CHILD = r"""
import json, sys
side, calls = sys.argv[1], int(sys.argv[3])
import httpx2, openai
from retrylens.sdk import Governor, observe, provider_hook
from retrylens.sdk.transport.emitter import Emitter
from retrylens.testing import MemorySink
body = json.dumps({
    "id": "c", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}).encode()
transport = httpx2.MockTransport(lambda request: httpx2.Response(
    200, content=body, headers={"content-type": "application/json"}))
client = openai.OpenAI(base_url="http://provider.test/v1", api_key="sk-bench",
                       http_client=httpx2.Client(transport=transport))
hi = [{"role": "user", "content": "hi"}]
def ask():
    return client.chat.completions.create(model="m", messages=hi)
emitter = Emitter(sink=MemorySink(), spool=None, queue_size=1_000_000)
governor = Governor(emit=emitter.emit)
if side in ("plain", "governed_unhooked"):
    provider_hook.uninstall()
if side == "observed":
    observe(emit=emitter.emit)
if side.startswith("governed"):
    def once():
        governor.call(ask, goal="bench", agent="a", dependency="openai")
else:
    once = ask
for _ in range(30):
    once()
emitter.flush(timeout_s=600)
for _ in range(calls):
    once()
emitter.flush(timeout_s=600)
"""

_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def count(side: str, path: str, calls: int, python: str) -> int:
    """Instructions of one child run (start-up included)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "child.py"
        script.write_text(_PROVIDER_CHILD if path == "provider" else _CHILD)
        done = subprocess.run(
            [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                f"--cachegrind-out-file={tmp}/out",
                python,
                str(script),
                side,
                path,
                str(calls),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    found = _REFS.search(done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def per_call(side: str, path: str, calls: int, python: str) -> float:
    """Instructions per call: the long run minus the short one, over the extra calls."""
    short, long = count(side, path, calls, python), count(side, path, 3 * calls, python)
    return (long - short) / (2 * calls)


def measure(calls: int, python: str) -> dict[str, float | int]:
    results: dict[str, float | int] = {}
    for path in ("first", "retry"):
        for side in ("governed", "tenacity"):
            results[f"{side}_{path}_instructions"] = round(per_call(side, path, calls, python))
        results[f"{path}_ratio"] = round(
            results[f"governed_{path}_instructions"] / results[f"tenacity_{path}_instructions"], 3
        )
    results["first_try_target_met"] = int(results["first_ratio"] <= 1.0)
    results["retry_target_met"] = int(results["retry_ratio"] <= 2.0)
    return results


def measure_provider(calls: int, python: str) -> dict[str, float | int | None]:
    sides = ("plain", "observed", "governed", "governed_unhooked")
    got = {side: per_call(side, "provider", calls, python) for side in sides}
    first_try = got["governed_unhooked"] - got["plain"]
    observed_added = got["observed"] - got["plain"]
    hook_added = got["governed"] - got["governed_unhooked"]
    return {
        **{f"{side}_instructions": round(n) for side, n in got.items()},
        "first_try_added_instructions": round(first_try),
        "observed_added_instructions": round(observed_added),
        "governed_hook_added_instructions": round(hook_added),
        "observed_to_first_try": round(observed_added / first_try, 3) if first_try else None,
        "observed_target_met": int(observed_added <= first_try),
        "governed_target_met": int(hook_added <= first_try),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calls", type=int, default=200, help="calls in the short loop")
    parser.add_argument(
        "--provider", action="store_true", help="a real openai call: plain, observed, governed"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny size: the test suite's smoke run")
    args = parser.parse_args()
    if args.smoke:
        args.calls = 2
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not on PATH")
    if args.smoke and not args.provider:  # one side's first try: two interpreters under valgrind, not eight
        results: dict[str, float | int | None] = {
            "governed_first_instructions": round(per_call("governed", "first", args.calls, sys.executable))}
    else:
        results = (measure_provider if args.provider else measure)(args.calls, sys.executable)
    if args.json:
        print(json.dumps(results))
        return
    for key, value in results.items():
        print(f"{key:>30}: {value}")


if __name__ == "__main__":
    main()
