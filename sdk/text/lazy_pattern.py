"""Regular expressions compiled on first use, so importing the SDK compiles none.

Compiling the SDK's redaction and feature patterns at import took a third of the SDK's
import time; most agent processes never redact anything before their first failure.
"""

from __future__ import annotations

import re
from typing import Any


class LazyPattern:
    """``re.compile(pattern, flags)`` deferred until the first match; same methods."""

    __slots__ = ("_source", "_flags", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled

    @property
    def pattern(self) -> str:
        return self._source

    def sub(self, repl: Any, string: str, count: int = 0) -> str:
        return self.compiled.sub(repl, string, count)

    def search(self, string: str) -> re.Match[str] | None:
        return self.compiled.search(string)

    def match(self, string: str) -> re.Match[str] | None:
        return self.compiled.match(string)

    def findall(self, string: str) -> list[Any]:
        return self.compiled.findall(string)

    def finditer(self, string: str) -> Any:
        return self.compiled.finditer(string)
