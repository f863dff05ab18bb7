"""What an agent pays to start RetryLens: importing the SDK and building an emitter.

Each figure is the median over ``--runs`` fresh interpreters (``python -c ...``), timed
inside the interpreter around the statements alone (interpreter start-up is the same for
both and left out). Measured side by side, alternating, in the same run:

* ``sdk_import_ms`` — ``from retrylens.sdk import Governor, build_emitter`` and
  ``build_emitter()`` (spool mode, a fresh data directory), as the README's snippet does;
* ``tenacity_import_ms`` — ``import tenacity``, the baseline an agent already pays;
* ``governor_ready_ms`` — the snippet plus ``Governor(project=...)`` with the default
  policy: the first policy loads pydantic, so this is what an agent pays before its first
  governed call.

Also prints which server libraries (or pydantic/asyncio) the snippet left in
``sys.modules``; the target is none of the server libraries and
``sdk_import_ms <= 2 x tenacity_import_ms``. ``cpu_ratio`` is the same ratio in CPU time
(``time.process_time``), steadier on a shared machine. Usage: ``python bench/sdk_import.py [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from retrylens.layers import SERVER_LIBRARIES, SERVER_PACKAGES

SERVER_MODULES = (*SERVER_LIBRARIES, *SERVER_PACKAGES)
WATCHED = (*SERVER_MODULES, "pydantic", "kafka", "httpx", "yaml", "asyncio")
TARGET_RATIO = 2.0

_TIMER = """
import sys, time
t0, c0 = time.perf_counter(), time.process_time()
{body}
elapsed, cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
loaded = [m for m in {watched!r} if m in sys.modules]
print(repr((elapsed, cpu, loaded)))
"""
SNIPPETS = {
    "sdk_import_ms": "from retrylens.sdk import Governor, build_emitter\nemitter = build_emitter()",
    "tenacity_import_ms": "import tenacity",
    "governor_ready_ms": (
        "from retrylens.sdk import Governor, build_emitter\nemitter = build_emitter()\n"
        "governor = Governor(project='shop', emit=emitter.emit)"
    ),
}


def _once(body: str, data_dir: str) -> tuple[float, float, list[str]]:
    env = {**os.environ, "RETRYLENS_DATA_DIR": data_dir}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    # Installed packages (tenacity) ship compiled byte code; an editable checkout gets it on
    # first import, unless the environment forbids writing it. Allow it, for both sides.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = _TIMER.format(body=body, watched=WATCHED)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    ).stdout
    elapsed, cpu, loaded = eval(out.strip().splitlines()[-1])  # noqa: S307 - our own repr output
    return elapsed, cpu, loaded


def measure(runs: int) -> dict[str, object]:
    samples: dict[str, list[float]] = {name: [] for name in SNIPPETS}
    cpu: dict[str, list[float]] = {name: [] for name in SNIPPETS}
    loaded: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, body in SNIPPETS.items():  # warm the byte-code caches once
            _once(body, os.path.join(tmp, f"warm-{name}"))
        for i in range(runs):
            for name, body in SNIPPETS.items():
                elapsed, cpu_ms, modules = _once(body, os.path.join(tmp, f"{name}-{i}"))
                samples[name].append(elapsed)
                cpu[name].append(cpu_ms)
                loaded[name] = modules
    result: dict[str, object] = {name: round(statistics.median(v), 1) for name, v in samples.items()}
    result["runs"] = runs
    result["ratio"] = round(float(result["sdk_import_ms"]) / float(result["tenacity_import_ms"]), 2)  # type: ignore[arg-type]
    result["target_ratio"] = TARGET_RATIO
    # CPU time of the same statements: steadier than wall time when other jobs share the cores
    sdk_cpu, tenacity_cpu = (statistics.median(cpu[n]) for n in ("sdk_import_ms", "tenacity_import_ms"))
    result["sdk_import_cpu_ms"], result["tenacity_import_cpu_ms"] = round(sdk_cpu, 1), round(tenacity_cpu, 1)
    result["cpu_ratio"] = round(sdk_cpu / tenacity_cpu, 2)
    result["server_modules_loaded"] = [m for m in loaded["sdk_import_ms"] if m in SERVER_MODULES]
    result["other_modules_loaded"] = [m for m in loaded["sdk_import_ms"] if m not in SERVER_MODULES]
    result["governor_ready_modules_loaded"] = loaded["governor_ready_ms"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per figure")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--smoke", action="store_true", help="tiny size: one interpreter per figure")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    result = measure(args.runs)
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:32} {value}")


if __name__ == "__main__":
    main()
