"""Random ids for events, traces, spans and tasks: reproducible when seeded, unique when not.

A governor given a seeded ``random.Random`` (tests, the simulated fleet) draws every id
from it, so a seeded run replays exactly. Otherwise ids come from ``os.urandom``, fetched
in bulk (one system call per ~250 events) into a per-thread buffer that a forked child
throws away — a pseudo-random generator copied into forked workers would hand every
worker the same "random" ids, and the store would collapse their events as duplicates.
"""

from __future__ import annotations

import os
import random
import threading
import uuid
from typing import Protocol

_UUID_VERSION_MASK = ~((0xF000 << 64) | (0xC000 << 48))
_UUID_V4_BITS = (0x4000 << 64) | (0x8000 << 48)
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


class IdSource(Protocol):
    """Where a governor's ids come from."""

    def hex(self, chars: int) -> str:
        """``chars`` random lowercase hex digits."""

    def uuid4(self) -> uuid.UUID:
        """A random version-4 UUID."""


def uuid4_from_int(value: int) -> uuid.UUID:
    """A version-4 UUID from 128 random bits, without ``UUID.__init__``'s argument checks.

    Sets the two slots through their descriptors (``UUID.__setattr__`` refuses writes):
    about half the cost of ``object.__setattr__``, and one is made per event.
    """
    made = _new(_UUID)
    _set_int(made, (value & _UUID_VERSION_MASK) | _UUID_V4_BITS)
    _set_safe(made, _SAFE_UNKNOWN)
    return made


_new = object.__new__
_UUID = uuid.UUID
_set_int = uuid.UUID.__dict__["int"].__set__
_set_safe = uuid.UUID.__dict__["is_safe"].__set__
_from_bytes = int.from_bytes  # big-endian by default


class SeededIds:
    """Ids drawn from ``rng`` (same sequence as before: a seeded run replays exactly)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def hex(self, chars: int) -> str:
        return f"{self.rng.getrandbits(chars * 4):0{chars}x}"

    def uuid4(self) -> uuid.UUID:
        return uuid4_from_int(self.rng.getrandbits(128))  # == uuid.UUID(int=…, version=4)


class SystemIds:
    """Ids from ``os.urandom`` in bulk; thread-safe and fork-safe."""

    CHUNK_BYTES = 4096

    def hex(self, chars: int) -> str:
        try:
            state = _local.state  # [hex buffer, position, raw buffer, position]: one lookup
        except AttributeError:
            state = _local.state = ["", 0, b"", 0]
        buffer, position = state[0], state[1]
        end = position + chars
        if end > len(buffer):
            buffer = state[0] = os.urandom(max(self.CHUNK_BYTES, chars)).hex()
            position, end = 0, chars
        state[1] = end
        return buffer[position:end]

    def uuid4(self) -> uuid.UUID:
        # ``uuid4_from_int(…)`` inline, one per event: 16 raw bytes of their own buffer read
        # by ``int.from_bytes`` (a third of what parsing 32 hex digits costs)
        try:
            state = _local.state
        except AttributeError:
            state = _local.state = ["", 0, b"", 0]
        raw, position = state[2], state[3]
        end = position + 16
        if end > len(raw):
            raw = state[2] = os.urandom(self.CHUNK_BYTES)
            position, end = 0, 16
        state[3] = end
        made = _new(_UUID)
        _set_int(made, (_from_bytes(raw[position:end]) & _UUID_VERSION_MASK) | _UUID_V4_BITS)
        _set_safe(made, _SAFE_UNKNOWN)
        return made


_local = threading.local()


def _forget_in_child() -> None:
    global _local
    _local = threading.local()


os.register_at_fork(after_in_child=_forget_in_child)
