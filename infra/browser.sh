#!/usr/bin/env bash
# Debian packages the tests drive: `kcat` (the README's Kafka example for agents in other
# languages, run as written), and for the dashboard's browser test Debian's `chromium`
# (driven by Playwright through executable_path, so `playwright install` never runs and no
# browser is downloaded from outside the distribution), fonts for readable screenshots,
# and the Playwright Python package. Idempotent: installed pieces are skipped.
set -euo pipefail

PYTHON="${PYTHON:-python3}"
SUDO=""
if [[ "$(id -u)" -ne 0 ]] && command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
fi

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
dpkg -s fonts-dejavu-core >/dev/null 2>&1 || missing+=(fonts-dejavu-core)
dpkg -s fonts-liberation >/dev/null 2>&1 || missing+=(fonts-liberation)
if [[ ${#missing[@]} -gt 0 ]]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! "$PYTHON" -c "import playwright" >/dev/null 2>&1; then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check "playwright>=1.45"
fi

chromium --version
"$PYTHON" -c "import importlib.metadata as m; print('playwright', m.version('playwright'))"
