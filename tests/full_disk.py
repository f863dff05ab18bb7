"""A real filesystem that fills up: a small tmpfs mounted for one test and unmounted after.

The spool's promise under ``ENOSPC`` (a write that stops part-way, then refuses) can only
be seen on a real full disk; a mocked ``write`` would show what the mock was told. Mounting
needs root (or ``CAP_SYS_ADMIN``), which this machine and CI have: where it is missing the
test FAILS saying so, never skips (a skipped proof is no proof).
"""

from __future__ import annotations

import errno
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

_FILLER = "filler"


@contextmanager
def small_filesystem(size_kib: int = 256) -> Iterator[Path]:
    """A directory on its own tmpfs of ``size_kib`` KiB, for the duration of the block."""
    directory = Path(tempfile.mkdtemp(prefix="retrylens-full-disk-"))
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0700", "tmpfs", str(directory)]
    done = subprocess.run(mount, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        directory.rmdir()
        pytest.fail(
            f"cannot mount a tmpfs for the full-disk test ({' '.join(mount)}: {done.stderr.strip()}); "
            "it needs root or CAP_SYS_ADMIN, as on the project's machine and CI",
            pytrace=False,
        )
    try:
        yield directory
    finally:
        # Lazy: a file the code under test still holds open must not keep the mount alive.
        subprocess.run(["umount", "-l", str(directory)], check=True)
        directory.rmdir()


def fill(directory: Path) -> Path:
    """Write a filler file until the filesystem refuses (``ENOSPC``); returns its path."""
    filler = directory / _FILLER
    chunk = b"\0" * 4096
    with open(filler, "ab", buffering=0) as handle:
        while True:
            try:
                if handle.write(chunk) == 0:
                    break
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    assert os.statvfs(directory).f_bavail == 0, "the filesystem should be full"
    return filler


def free(directory: Path) -> None:
    """Give the filler's space back."""
    (directory / _FILLER).unlink()
