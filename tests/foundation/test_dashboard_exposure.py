"""The dashboard has no login and reads every project: it is reachable on loopback only unless
the operator says otherwise (issue 36: the compose file published it on every interface)."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml

from retrylens.cli.dashboard_cmds import streamlit_command
from retrylens.cli.main import app

REPO = Path(__file__).resolve().parents[2]


def test_compose_publishes_the_dashboard_on_the_hosts_loopback_only() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    ports = compose["services"]["dashboard"]["ports"]
    assert ports and all(str(p).startswith("127.0.0.1:") for p in ports), ports


def test_compose_file_says_how_to_reach_the_dashboard_safely() -> None:
    text = (REPO / "docker-compose.yml").read_text()
    comment = text[text.index("no login"):text.index("  dashboard:")]
    assert "ssh -L 8501:127.0.0.1:8501" in comment and "reverse proxy" in comment


def test_dashboard_and_up_bind_the_dashboard_to_loopback_by_default() -> None:
    commands = typer.main.get_command(app).commands
    for name in ("dashboard", "up"):
        host = next(p for p in commands[name].params if p.name == "host")
        assert host.default == "127.0.0.1", name
    assert "--server.address=127.0.0.1" in streamlit_command("127.0.0.1", 8501)
