"""What every command shares: loading settings, progress bars, and turning known errors into exit codes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column

from retrylens.config import Settings, load_settings
from retrylens.errors import ArgumentError, ConfigError, InvalidBurstError, RetryLensError

P = ParamSpec("P")
R = TypeVar("R")

console = Console(stderr=True, soft_wrap=True)
ConfigOption = typer.Option(None, "--config", help="TOML settings file (also RETRYLENS_CONFIG).")


def progress_bars(console: Console, *, counts: bool = True) -> Progress:
    """Progress bars that fit the terminal: a long step description wraps onto a second line and
    the bar shrinks, but the counts and the elapsed time are never cut (rich's defaults give the
    description and a 40-character bar their full width and cut the line at the terminal's edge)."""
    columns = [
        TextColumn("{task.description}", table_column=Column(ratio=3, overflow="fold")),
        BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=5)),
        *([MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=9))] if counts else []),
        TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=7)),
    ]
    return Progress(*columns, console=console, transient=False, expand=True)


def settings_from(config: Path | None, **overrides: Any) -> Settings:
    return load_settings(config, **{k: v for k, v in overrides.items() if v is not None})


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Known errors become one clear line on stderr and a non-zero exit, not a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except ArgumentError as exc:
            console.print(f"[red]invalid argument:[/red] {exc}")
            sys.exit(2)
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
