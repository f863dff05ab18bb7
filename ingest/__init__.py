"""How events travel: emitter and spool (agent side), Kafka consumer and spool ingestor."""

from .emitter import Emitter, Sink
from .pipeline import build_emitter
from .processor import InvalidMessage, InvalidReason, SourceRef, ValidEvent, process

__all__ = [
    "Emitter",
    "InvalidMessage",
    "InvalidReason",
    "Sink",
    "SourceRef",
    "ValidEvent",
    "build_emitter",
    "process",
]
