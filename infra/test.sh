#!/usr/bin/env bash
# The whole test run on a fresh machine, in a fresh virtual environment:
#   1. get uv (into a tools venv of its own; pip from PyPI),
#   2. build a NEW venv (never the system interpreter's site-packages) with the
#      dependencies chosen by DEPS:
#        locked  (default) exactly uv.lock, the versions a new user gets today
#        lowest  the lowest versions pyproject.toml allows for every direct dependency
#                (uv --resolution lowest-direct): proves the declared lower bounds
#        newest  whatever the registry serves now, ignoring the lock
#   3. start the real services the tests use (a local Kafka 4.x broker, in the background
#      while step 2 runs; ClickHouse is embedded via chDB), run pytest inside the venv, stop
#      the services.
# Exits non-zero on any failure, including "no tests ran" (pytest exit 5).
#
# Environment: DEPS (above); PYTEST_ARGS (extra pytest arguments, e.g. -m "not browser");
# RETRYLENS_TEST_VENV (where the venv goes; default .venv-test-$DEPS, recreated each run);
# PYTHON (interpreter the venv is built from; default python3); KAFKA_PORT (default 9092);
# PYTEST_WORKERS (pytest-xdist worker processes; default two per core, 0 = none);
# RETRYLENS_TEST_STEP: all (default: build, then run), build (only steps 1-2: the venv,
# no broker, no pytest) or run (only step 3, in the venv an earlier `build` left): .ci/run
# builds the lowest run's venv in the background while the locked run's tests run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DEPS="${DEPS:-locked}"
export DEPS  # tests read it: the lowest run checks every floor is what it installed
PYTHON="${PYTHON:-python3}"
VENV="${RETRYLENS_TEST_VENV:-$PWD/.venv-test-$DEPS}"
TOOLS="${RETRYLENS_TOOLS_VENV:-$PWD/.venv-tools}"

log() { printf '[test.sh] %s\n' "$*" >&2; }

if [[ ! -x "$TOOLS/bin/uv" ]]; then
  log "installing uv into $TOOLS"
  "$PYTHON" -m venv "$TOOLS"
  "$TOOLS/bin/python" -m pip install --quiet --disable-pip-version-check "uv>=0.5"
fi
UV="$TOOLS/bin/uv"

case "$DEPS" in
  locked|lowest|newest) ;;
  *) log "unknown DEPS=$DEPS (locked, lowest or newest)"; exit 2 ;;
esac
STEP="${RETRYLENS_TEST_STEP:-all}"
case "$STEP" in
  all|build|run) ;;
  *) log "unknown RETRYLENS_TEST_STEP=$STEP (all, build or run)"; exit 2 ;;
esac

# The broker starts in the background while the venv is built (or, for a venv built
# earlier, while pytest collects): ~20 s saved per run; tests/conftest.py waits after
# collection, before any test, for $RETRYLENS_TEST_KAFKA_READY_FILE (touched once
# `kafka.sh start` has seen the broker serve requests) or its `.failed` twin.
start_broker() {
  export KAFKA_PORT="${KAFKA_PORT:-9092}"
  export RETRYLENS_TEST_KAFKA="127.0.0.1:${KAFKA_PORT}"
  KAFKA_START_LOG="$(mktemp "${TMPDIR:-/tmp}/retrylens-kafka-start.XXXXXX")"
  export RETRYLENS_TEST_KAFKA_READY_FILE="$KAFKA_START_LOG.ready"
  (
    if bash infra/kafka/kafka.sh start; then touch "$RETRYLENS_TEST_KAFKA_READY_FILE"
    else code=$?; touch "$RETRYLENS_TEST_KAFKA_READY_FILE.failed"; exit $code; fi
  ) >"$KAFKA_START_LOG" 2>&1 &
  kafka_start=$!
  # On any exit: let a start still under way finish (so no broker outlives us), then stop it.
  trap 'wait "$kafka_start" 2>/dev/null; bash infra/kafka/kafka.sh stop >/dev/null 2>&1 || true; rm -f "$KAFKA_START_LOG" "$RETRYLENS_TEST_KAFKA_READY_FILE"{,.failed}' EXIT
}

build_venv() {
  log "fresh venv $VENV (DEPS=$DEPS)"
  rm -rf "$VENV"
  # Every installed module compiled to bytecode once, here (~13 s on 2 cores for the
  # locked set): with PYTHONDONTWRITEBYTECODE set (this machine's default) Python never
  # writes a .pyc, so every process of the run (each pytest worker, each CLI, server,
  # demo or fit a test starts) compiled numpy, pandas, FastAPI, ... from source again:
  # 5.4 s of CPU to import the CLI and the server, 2.6 s with the bytecode. (A flag on each
  # install, not UV_COMPILE_BYTECODE: the tests' own installs must stay what a user gets.)
  "$UV" venv --quiet --python "$PYTHON" "$VENV"
  case "$DEPS" in
    locked)
      UV_PROJECT_ENVIRONMENT="$VENV" "$UV" sync --quiet --compile-bytecode --frozen --extra test --python "$VENV/bin/python"
      ;;
    lowest)
      "$UV" pip install --quiet --compile-bytecode --python "$VENV/bin/python" --resolution lowest-direct -e ".[test]"
      ;;
    newest)
      "$UV" pip install --quiet --compile-bytecode --python "$VENV/bin/python" --upgrade -e ".[test]"
      ;;
  esac
  VPY="$VENV/bin/python"
  # A public benchmark's real stateful tools for the governor's acceptance test
  # (tests/sdk/test_sdk_bfcl_acceptance.py). Its declared dependencies pull torch; its tool
  # classes need only mpmath, so it is installed without them, pinned.
  "$UV" pip install --quiet --compile-bytecode --python "$VPY" --no-deps "bfcl-eval==2026.3.23" "mpmath==1.4.1"
  # litellm, for the test that its own retries under observe() are one task's attempts
  # (tests/sdk/test_litellm_observed.py): not a dependency of the project (with its declared
  # dependencies +139 MB, and it would move python-dateutil), so it is installed without
  # them, pinned, with the three modules its import needs that the locked set lacks
  # (~70 MB, in the test venv only). 1.81.13 was released before litellm's compromised releases.
  "$UV" pip install --quiet --compile-bytecode --python "$VPY" --no-deps "litellm==1.81.13" \
    "tiktoken==0.14.0" "tokenizers==0.23.3" "fastuuid==0.14.0"
  # The suite must see the venv's packages and nothing else.
  "$VPY" - <<'EOF'
import sys, sysconfig
assert sys.prefix != sys.base_prefix, "tests must run inside a virtual environment"
import pydantic, retrylens
print(f"[test.sh] python {sys.version.split()[0]} in {sys.prefix}; pydantic {pydantic.VERSION}; "
      f"retrylens from {retrylens.__file__}", file=sys.stderr)
EOF
  "$UV" pip freeze --python "$VPY" > "$VENV/freeze.txt"
  log "versions: $(grep -E '^(pydantic|fastapi|pandas|chdb|streamlit|langchain-core|kafka-python)==' "$VENV/freeze.txt" | tr '\n' ' ')"

  if [[ -x infra/browser.sh ]]; then
    PYTHON="$VPY" bash infra/browser.sh
  fi
}

VPY="$VENV/bin/python"
case "$STEP" in
  all) start_broker; build_venv ;;
  build) build_venv; log "venv $VENV built (DEPS=$DEPS)"; exit 0 ;;
  run)
    if [[ ! -f "$VENV/freeze.txt" ]]; then
      log "no venv built at $VENV: run RETRYLENS_TEST_STEP=build first"; exit 2
    fi
    log "venv $VENV built earlier (DEPS=$DEPS)"
    start_broker
    ;;
esac

# Tests start the CLI as `python -m retrylens`, never through PATH.
export PATH="/usr/local/bin:/usr/bin:/bin"
# The project's own modules and pytest's rewritten test modules are compiled once and kept
# (in the work tree's __pycache__ folders, which git ignores) instead of in every process
# again: each pytest worker's collection took 26 s of CPU without any bytecode, 12 s with.
unset PYTHONDONTWRITEBYTECODE
extra=()
if [[ -n "${PYTEST_ARGS:-}" ]]; then eval "extra=(${PYTEST_ARGS})"; fi
set +e
# pytest-xdist workers, whole modules per worker (a module's fixtures, private brokers and
# ports stay in one process), handed out in collection order, which tests/conftest.py makes
# longest module first. Two workers per core, not one: a worker spends about half its wall
# time waiting (on a CLI, server or demo subprocess starting, on the broker, on a receiver's
# timeout), so two workers left a core idle half the run (session 12's locked run at load 1-4: 514.6 s
# of CPU in 478 s on 2 cores, 54 %). Four workers on a quiet 2-core machine still leave each
# at least half a core; session 16 ran 1,830 of the tests in one process at a load of 16-19
# (a ninth of a core each) with only two timing checks failing (alert delivery's black hole,
# on the old tree too, and a 1 s deadline around a refused connect). PYTEST_WORKERS=N sets
# the count; 0 runs in this process.
default_workers=$(( 2 * $(nproc 2>/dev/null || echo 1) ))
workers=(-n "${PYTEST_WORKERS:-$default_workers}" --dist loadfile --no-loadscope-reorder)
if [[ "${PYTEST_WORKERS:-$default_workers}" == "0" ]]; then workers=(-p no:xdist); fi
"$VPY" -m pytest "${workers[@]}" "${extra[@]}" "$@"
status=$?
wait "$kafka_start"
kafka_status=$?
set -e
cat "$KAFKA_START_LOG" >&2
if [[ $kafka_status -ne 0 ]]; then
  log "the Kafka broker did not start (kafka.sh start exited $kafka_status): failing the run"
  exit 1
fi
if [[ $status -eq 5 ]]; then
  echo "pytest collected no tests: failing the run" >&2
  exit 1
fi
exit $status
