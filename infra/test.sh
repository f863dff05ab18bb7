#!/usr/bin/env bash
# The whole test run on a fresh machine: install RetryLens with its test extras, start the
# real services the tests use (a local Kafka 4.x broker; ClickHouse is embedded via chDB),
# run pytest, stop the services. Exits non-zero on any failure, including "no tests ran".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
"$PYTHON" -m pip install --quiet --disable-pip-version-check -e ".[test]"

if [[ -x infra/browser.sh ]]; then
  bash infra/browser.sh
fi

export KAFKA_PORT="${KAFKA_PORT:-9092}"
export RETRYLENS_TEST_KAFKA="127.0.0.1:${KAFKA_PORT}"
bash infra/kafka/kafka.sh start
trap 'bash infra/kafka/kafka.sh stop >/dev/null 2>&1 || true' EXIT

set +e
"$PYTHON" -m pytest "$@"
status=$?
set -e
if [[ $status -eq 5 ]]; then
  echo "pytest collected no tests: failing the run" >&2
fi
exit $status
