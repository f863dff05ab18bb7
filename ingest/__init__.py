"""How events arrive at the store (server side): Kafka consumer, spool ingestor, processor.

The agent side of the road (emitter, spool, Kafka sink) is :mod:`retrylens.sdk.transport`.
"""

from .processor import InvalidMessage, InvalidReason, SourceRef, ValidEvent, process

__all__ = ["InvalidMessage", "InvalidReason", "SourceRef", "ValidEvent", "process"]
