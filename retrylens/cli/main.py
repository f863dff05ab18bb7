"""``retrylens``: the single entry point. Each area registers its commands here."""

from __future__ import annotations

import typer

from . import (
    analytics_cmds,
    api_cmds,
    dashboard_cmds,
    demo_cmds,
    ingest_cmds,
    report_cmds,
    sdk_cmds,
    store_cmds,
    task_cmds,
)

app = typer.Typer(
    name="retrylens",
    help="Explicit, recorded and learnable retry decisions for LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

for module in (demo_cmds, ingest_cmds, store_cmds, sdk_cmds, analytics_cmds, task_cmds, api_cmds, dashboard_cmds,
               report_cmds):
    module.register(app)


if __name__ == "__main__":
    app()
