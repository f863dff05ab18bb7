"""How an agent's events leave the process: emitter, spool, Kafka sink, settings.

``emit()`` never blocks and never raises; the emitter's pump delivers to Kafka or, when
none is configured or the broker is down, to a crash-safe local spool.
"""

from .build import build_emitter
from .emitter import Emitter, Record, Sink
from .settings import EmitterSettings
from .spool import Spool

__all__ = ["Emitter", "EmitterSettings", "Record", "Sink", "Spool", "build_emitter"]
