"""How an agent's events leave the process: emitter, spool, Kafka sink, settings.

``emit()`` never blocks and never raises; the emitter's pump delivers to Kafka or, when
none is configured or the broker is down, to a crash-safe local spool.

The names below load on first use (PEP 562): importing one module of this room (the
hand-off channels, the settings the server reads) does not load the emitter, the spool
and orjson with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .build import build_emitter
    from .emitter import Emitter, Record, Sink
    from .settings import EmitterSettings
    from .spool import Spool

#: public name -> the module of this room that defines it
_EXPORTS: dict[str, str] = {
    "Emitter": "emitter",
    "EmitterSettings": "settings",
    "Record": "emitter",
    "Sink": "emitter",
    "Spool": "spool",
    "build_emitter": "build",
}

__all__ = ["Emitter", "EmitterSettings", "Record", "Sink", "Spool", "build_emitter"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
