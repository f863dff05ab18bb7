"""``python -m retrylens``: the command line, also when no ``retrylens`` script is on PATH.

The CLI drives the server side (store, consumer, API, dashboard), whose libraries come with
the ``server`` extra. An SDK-only install gets a clear message instead of a traceback.
"""

from __future__ import annotations

import sys

SERVER_HINT = (
    "the retrylens command line needs the server libraries; install them with\n"
    '    pip install "retrylens[server]"\n'
    "(the agent SDK alone, `pip install retrylens`, has no command line)"
)


def main() -> None:
    try:
        from retrylens.cli.main import app
    except ModuleNotFoundError as exc:
        print(f"retrylens: missing module {exc.name!r}: {SERVER_HINT}", file=sys.stderr)
        raise SystemExit(2) from None
    app()


if __name__ == "__main__":
    main()
