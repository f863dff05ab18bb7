"""An append-only, crash-safe local log of serialized events.

The spool is where events wait when the broker is unreachable or the in-memory queue is
full, and (embedded mode) the durable road from agents to the store. It is a folder of
segment files of length-prefixed, CRC-checked records and one ``cursor`` file that says
how far a reader has durably handed records on. Readers see positions as
(segment, byte offset), the same shape as Kafka's (partition, offset), so the store's
insert-deduplication token works identically for both roads.

One writer per spool folder (an advisory lock enforces it); one reader at a time.
A torn record at the tail (crash mid-append) is left for the writer to complete or, on
reopen, truncated away.

An append that fails (a full disk: ``ENOSPC`` after part of the frames was written) is
rolled back before it raises :class:`~retrylens.errors.SpoolWriteError`: the segment is
truncated to the end of the last complete append, so the next append starts on a frame
boundary and readers and a reopen see every record written after the fault. If even the
truncation fails, every later append is refused until it succeeds: a record is never
written behind a torn frame, where no reader would find it.
"""

from __future__ import annotations

import errno
import fcntl
import io
import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from retrylens.errors import IngestError, SpoolLockedError, SpoolWriteError

from .private_dirs import private_dir

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">IIH")  # value length, crc32(key + value), key length
_SEGMENT_SUFFIX = ".log"
_CURSOR = "cursor"
_LOCK = "writer.lock"
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
_READ_CHUNK = 16 * 1024 * 1024


@dataclass(frozen=True, order=True)
class SpoolPosition:
    segment: int
    offset: int


@dataclass(frozen=True)
class SpoolRecord:
    position: SpoolPosition
    next_position: SpoolPosition
    key: bytes
    value: bytes


class Spool:
    """Append records; read them from the cursor; commit the cursor once handed on."""

    def __init__(self, directory: Path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES, writer: bool = True) -> None:
        self.directory = Path(directory)
        private_dir(self.directory)
        self._segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._lock_file = None
        self._file: io.FileIO | None = None
        self._good_end = 0  # where the open segment's last complete append ends
        self._torn = False  # a failed append's bytes are still past _good_end
        self._unsynced = False
        if writer:
            self._acquire_writer_lock()
            self._open_tail()

    # -- writing -----------------------------------------------------------------------
    def _acquire_writer_lock(self) -> None:
        self._lock_file = open(self.directory / _LOCK, "a+b")  # noqa: SIM115 - held for life
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self._lock_file.close()
            raise SpoolLockedError(f"spool {self.directory} is being written by another process") from exc

    def _segments(self) -> list[int]:
        return sorted(int(p.stem) for p in self.directory.glob(f"*{_SEGMENT_SUFFIX}") if p.stem.isdigit())

    def _segment_path(self, segment: int) -> Path:
        return self.directory / f"{segment:012d}{_SEGMENT_SUFFIX}"

    def _open_tail(self) -> None:
        segments = self._segments()
        self._segment = segments[-1] if segments else self.committed().segment
        path = self._segment_path(self._segment)
        valid_end = _valid_length(path) if path.exists() else 0
        # Unbuffered: a failed write leaves nothing in a buffer to reach the disk later.
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - the spool's open segment
        if self._file.seek(0, os.SEEK_END) != valid_end:
            self._file.truncate(valid_end)
        self._good_end = valid_end

    def append(self, records: Iterable[tuple[bytes, bytes]], *, sync: bool = True) -> int:
        """Append (key, value) records; with ``sync`` they are on disk when this returns."""
        if self._file is None:
            raise IngestError("this spool was opened read-only")
        frames = [
            _HEADER.pack(len(value), zlib.crc32(key + value), len(key)) + key + value for key, value in records
        ]
        if not frames:
            return 0
        data = b"".join(frames)
        with self._lock:
            try:
                self._roll_back()  # a rollback that failed earlier: nothing lands behind it
                if self._good_end >= self._segment_bytes:
                    self._rotate()
                _write_all(self._file, data)
                if sync:
                    os.fsync(self._file.fileno())
            except OSError as exc:
                self._torn = True
                self._roll_back_quietly()
                raise SpoolWriteError(
                    f"spool {self.directory} could not persist {len(frames)} records "
                    f"({exc.strerror or exc}); none was kept"
                ) from exc
            self._good_end += len(data)
            self._unsynced = self._unsynced or not sync
        return len(frames)

    def _roll_back(self) -> None:
        """Cut what a failed append left past the last complete one (raises if it cannot)."""
        if self._torn:
            assert self._file is not None
            os.ftruncate(self._file.fileno(), self._good_end)
            self._torn = False

    def _roll_back_quietly(self) -> None:
        try:
            self._roll_back()
        except OSError:
            log.warning("spool %s: rolling back a failed append failed; retried before the next", self.directory)

    def sync(self) -> None:
        with self._lock:
            if self._file is not None and self._unsynced:
                os.fsync(self._file.fileno())
                self._unsynced = False

    def _rotate(self) -> None:
        assert self._file is not None
        os.fsync(self._file.fileno())
        following = open(self._segment_path(self._segment + 1), "ab", buffering=0)  # noqa: SIM115
        self._file.close()
        self._file, self._segment, self._good_end = following, self._segment + 1, 0

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._roll_back_quietly()
                try:
                    os.fsync(self._file.fileno())
                finally:
                    self._file.close()
                    self._file = None
            if self._lock_file is not None:
                self._lock_file.close()
                self._lock_file = None

    # -- reading -----------------------------------------------------------------------
    def committed(self) -> SpoolPosition:
        try:
            segment, offset = (self.directory / _CURSOR).read_text().split()
            return SpoolPosition(int(segment), int(offset))
        except FileNotFoundError:
            segments = self._segments()
            return SpoolPosition(segments[0] if segments else 0, 0)

    def read(self, start: SpoolPosition | None = None, *, max_records: int = 5000) -> list[SpoolRecord]:
        """Complete records from ``start`` (default: the committed cursor), in order."""
        position = start or self.committed()
        records: list[SpoolRecord] = []
        for segment in (s for s in self._segments() if s >= position.segment):
            offset = position.offset if segment == position.segment else 0
            with open(self._segment_path(segment), "rb") as handle:
                handle.seek(offset)
                data = handle.read(_READ_CHUNK)
            cursor = 0
            while len(records) < max_records and cursor + _HEADER.size <= len(data):
                value_len, crc, key_len = _HEADER.unpack_from(data, cursor)
                end = cursor + _HEADER.size + key_len + value_len
                if end > len(data):
                    break  # torn or still being written
                key = data[cursor + _HEADER.size : cursor + _HEADER.size + key_len]
                value = data[cursor + _HEADER.size + key_len : end]
                here = SpoolPosition(segment, offset + cursor)
                nxt = SpoolPosition(segment, offset + end)
                if zlib.crc32(key + value) == crc:
                    records.append(SpoolRecord(here, nxt, key, value))
                cursor = end
            if len(records) >= max_records or cursor < len(data) or len(data) == _READ_CHUNK:
                break  # stop at a partial record or chunk end rather than skip ahead
        return records

    def has_pending(self) -> bool:
        return bool(self.read(max_records=1))

    def commit(self, position: SpoolPosition) -> None:
        """Durably move the cursor past handed-on records; drop fully read segments."""
        tmp = self.directory / f"{_CURSOR}.tmp"
        with open(tmp, "w") as handle:
            handle.write(f"{position.segment} {position.offset}")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.directory / _CURSOR)
        for segment in self._segments():
            if segment < position.segment:
                self._segment_path(segment).unlink(missing_ok=True)


def _write_all(file: io.FileIO, data: bytes) -> None:
    """Write all of ``data`` (an unbuffered write may take only part of it)."""
    view = memoryview(data)
    while view:
        written = file.write(view)
        if not written:
            raise OSError(errno.ENOSPC, "the segment took no more bytes")
        view = view[written:]


def _valid_length(path: Path) -> int:
    """Length of the prefix of ``path`` made of complete records."""
    data = path.read_bytes()
    cursor = 0
    while cursor + _HEADER.size <= len(data):
        value_len, _, key_len = _HEADER.unpack_from(data, cursor)
        end = cursor + _HEADER.size + key_len + value_len
        if end > len(data):
            break
        cursor = end
    return cursor
