"""The fork server's socket fits in a Unix socket address whatever $TMPDIR is (fast: no
server is started, only the directory is chosen)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def test_a_tmpdir_too_long_for_a_unix_socket_puts_the_socket_under_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from crashmatrix.harness.lives.forkserver import _SUN_PATH, _socket_dir

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    where = _socket_dir()
    try:
        assert len(os.path.join(where, "socket").encode()) <= _SUN_PATH
        assert where.startswith("/tmp/crashmatrix-forkserver-")
        assert list(deep.iterdir()) == []  # the too-long candidate was not left behind
    finally:
        os.rmdir(where)
    base = tempfile.mkdtemp(prefix="s", dir="/tmp")  # a short $TMPDIR is used as it is
    monkeypatch.setattr(tempfile, "tempdir", base)
    short = _socket_dir()
    try:
        assert short.startswith(base + "/crashmatrix-forkserver-")
    finally:
        os.rmdir(short)
        os.rmdir(base)
