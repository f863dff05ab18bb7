"""Folders holding tenants' events, models and secrets are created readable by their owner only."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrylens.api.auth import local_token
from retrylens.config import load_settings
from retrylens.sdk.transport.private_dirs import private_dir
from retrylens.sdk.transport.spool import Spool


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The common default (022), under which a plain ``mkdir`` makes a folder others can read."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_missing_folder_of_the_path_is_created_0700(tmp_path):
    private_dir(tmp_path / "a" / "b" / "c")
    assert [_mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3


def test_an_existing_folder_is_left_as_its_owner_set_it(tmp_path):
    (tmp_path / "shared").mkdir(mode=0o755)
    private_dir(tmp_path / "shared" / "inner")
    assert (_mode(tmp_path / "shared"), _mode(tmp_path / "shared" / "inner")) == (0o755, 0o700)


def test_a_file_in_the_way_is_an_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        private_dir(tmp_path / "file")


def test_the_spool_and_the_local_token_live_in_private_folders(tmp_path):
    data = tmp_path / "data"
    Spool(data / "spool").close()
    local_token(load_settings(data_dir=data / "token-home", kafka_bootstrap_servers=""))
    assert _mode(data) == _mode(data / "spool") == _mode(data / "token-home") == 0o700


def test_an_entry_that_appears_between_the_check_and_the_mkdir_is_not_a_crash(tmp_path):
    """A dangling link is absent to ``exists()`` and present to ``mkdir`` (as a folder another
    process made meanwhile would be): the mkdir's FileExistsError is not raised, and what is
    there is judged as a folder or not."""
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    with pytest.raises(NotADirectoryError, match="exists and is not a folder"):
        private_dir(tmp_path / "link")
