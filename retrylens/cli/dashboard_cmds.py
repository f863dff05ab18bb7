"""``retrylens dashboard`` (the Streamlit operator dashboard) and ``retrylens up`` (server + dashboard).

The dashboard never opens an embedded chDB store: that store belongs to the ``retrylens
serve`` process, so on embedded settings the dashboard reads through its API. With a
ClickHouse server DSN it reads the store directly. ``up`` starts both processes and stops
both on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import typer

from retrylens.errors import RetryLensError
from retrylens.sdk.transport.client import is_healthy, wait_until_healthy

from .common import ConfigOption, console, handle_errors, settings_from

SOURCE_ENV = "RETRYLENS_DASHBOARD_SOURCE"
ROADS = ("auto", "api", "store")
HostOption = typer.Option("127.0.0.1", "--host", help="Bind address of the dashboard.")
PortOption = typer.Option(8501, "--port", min=1, max=65535, help="Port of the dashboard.")
SourceOption = typer.Option(
    "auto", "--source",
    help="auto: through the API of `retrylens serve` when the store is embedded, directly for a ClickHouse "
         "server. store: open the store here (only a data directory no other process holds).",
)


def register(app: typer.Typer) -> None:
    """Add this area's commands to ``app``."""
    app.command()(dashboard)
    app.command()(up)


def app_script() -> Path:
    """The Streamlit entry script (inside the installed package)."""
    from retrylens import dashboard as package

    return Path(package.__file__).resolve().parent / "app.py"


def streamlit_command(host: str, port: int) -> list[str]:
    return [
        sys.executable, "-m", "streamlit", "run", str(app_script()),
        "--server.headless=true", f"--server.address={host}", f"--server.port={port}",
        "--browser.gatherUsageStats=false", "--server.fileWatcherType=none", "--server.runOnSave=false",
        "--global.developmentMode=false", "--client.toolbarMode=viewer", "--theme.base=light",
    ]


def _environment(config: Path | None, road: str, **settings_env: str) -> dict[str, str]:
    env = {**os.environ, SOURCE_ENV: road, **settings_env}
    if config is not None:
        env["RETRYLENS_CONFIG"] = str(config.resolve())
    return env


def _check_road(road: str) -> None:
    if road not in ROADS:
        raise typer.BadParameter(f"must be one of {', '.join(ROADS)}", param_hint="--source")


@handle_errors
def dashboard(
    host: str = HostOption,
    port: int = PortOption,
    config: Path | None = ConfigOption,
    source: str = SourceOption,
) -> None:
    """Serve the operator dashboard (Streamlit) on the configured store."""
    _check_road(source)
    settings = settings_from(config)
    if source == "api" or (source == "auto" and settings.is_embedded_store):
        if not is_healthy(settings.effective_api_url):
            console.print(
                f"[yellow]note:[/yellow] no RetryLens server answers at {settings.effective_api_url}; the embedded "
                "store is read through it. Start `retrylens serve` (or use `retrylens up` for both)."
            )
    console.print(f"RetryLens dashboard on http://{host}:{port} (source: {source})")
    command = streamlit_command(host, port)
    os.execve(sys.executable, command, _environment(config, source))


def _stop(processes: list[subprocess.Popen[bytes]], *, grace_s: float = 20.0) -> None:
    """SIGTERM each child still running, wait for them, SIGKILL what is left."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + grace_s
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _refuse_a_running_server(settings: Any) -> None:
    """``up`` starts a server of its own: when one already owns this data directory's store, or
    anything answers on the API's address, say so (with its URL) instead of announcing that
    server as this command's."""
    from retrylens.api.advert import advertised_url

    owner = advertised_url(settings) if settings.is_embedded_store else None
    if owner is not None:
        raise RetryLensError(
            f"a RetryLens server already runs on this data directory at {owner}; open its dashboard with "
            "`retrylens dashboard`, or stop that server before `retrylens up`")
    if is_healthy(settings.effective_api_url):
        raise RetryLensError(
            f"a server already answers at {settings.effective_api_url}; stop it or give `retrylens up` another "
            "--api-port")


def _ours(settings: Any, server: subprocess.Popen[bytes]) -> bool:
    """Whether the server that answers is the one this command started (its announcement names its pid)."""
    if server.poll() is not None:
        return False
    if not settings.is_embedded_store:
        return True
    from retrylens.api.advert import advert_path

    try:
        return int(json.loads(advert_path(settings).read_text())["pid"]) == server.pid
    except (OSError, ValueError, KeyError, TypeError):
        return False


@handle_errors
def up(
    host: str = HostOption,
    port: int = PortOption,
    api_host: str | None = typer.Option(None, "--api-host", help="Bind address of the API (default: api_host)."),
    api_port: int | None = typer.Option(None, "--api-port", min=1, max=65535, help="Port of the API (default: api_port)."),
    config: Path | None = ConfigOption,
    startup_timeout: float = typer.Option(60.0, min=1, help="Seconds to wait for the API to answer."),
) -> None:
    """Start the API server (owner of the embedded store) and the dashboard; stop both on Ctrl-C/SIGTERM."""
    settings = settings_from(config, api_host=api_host, api_port=api_port)
    _refuse_a_running_server(settings)
    settings_env = {"RETRYLENS_API_HOST": settings.api_host, "RETRYLENS_API_PORT": str(settings.api_port)}
    cli = [sys.executable, "-m", "retrylens.cli.main"]
    config_args = ["--config", str(config.resolve())] if config else []
    stopping = False

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    children: list[subprocess.Popen[bytes]] = []
    try:
        server = subprocess.Popen(
            [*cli, "serve", "--host", settings.api_host, "--port", str(settings.api_port), *config_args],
            env=_environment(config, "auto", **settings_env),
        )
        children.append(server)
        if not wait_until_healthy(settings.effective_api_url, server, timeout_s=startup_timeout) or not _ours(
                settings, server):
            console.print(f"[red]error:[/red] the API server did not come up at {settings.effective_api_url}")
            raise typer.Exit(1)
        console.print(f"API on {settings.effective_api_url}; dashboard on http://{host}:{port}")
        children.append(subprocess.Popen(
            [*cli, "dashboard", "--host", host, "--port", str(port), *config_args],
            env=_environment(config, "auto", **settings_env),
        ))
        while not stopping and all(child.poll() is None for child in children):
            time.sleep(0.2)
        failed = [child for child in children if child.poll() not in (None, 0)]
        if failed and not stopping:
            console.print(f"[red]error:[/red] a child process exited with status {failed[0].returncode}; stopping")
            raise typer.Exit(1)
    finally:
        # The dashboard first (it reads through the server), then the server (it drains ingestion).
        _stop(list(reversed(children)))
        for sig, handler in previous.items():
            signal.signal(sig, handler)
