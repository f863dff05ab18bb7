"""What every command shares: loading settings and turning known errors into exit codes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from retrylens.config import Settings, load_settings
from retrylens.errors import ConfigError, InvalidBurstError, RetryLensError

P = ParamSpec("P")
R = TypeVar("R")

console = Console(stderr=True, soft_wrap=True)
ConfigOption = typer.Option(None, "--config", help="TOML settings file (also RETRYLENS_CONFIG).")


def settings_from(config: Path | None, **overrides: Any) -> Settings:
    return load_settings(config, **{k: v for k, v in overrides.items() if v is not None})


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Known errors become one clear line on stderr and a non-zero exit, not a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except ConfigError as exc:
            console.print(f"[red]configuration error:[/red] {exc}")
            sys.exit(2)
        except InvalidBurstError as exc:
            console.print(f"[red]consumer stopped:[/red] {exc}")
            sys.exit(3)
        except RetryLensError as exc:
            console.print(f"[red]error:[/red] {exc}")
            sys.exit(1)

    return wrapper
