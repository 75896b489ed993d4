"""harness.lives.janitor: a temporary directory (the fork server's warm-up life's) is removed
when its block ends, and when the process using it is SIGKILLed inside the block -- the fork
server is, whenever the harness stops during its warm-up (tests/harness/lives/test_casedir.py
and test_interrupt.py look at $TMPDIR after such a stop)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from crashmatrix.harness.lives.janitor import temporary_directory

from ...waiting import wait_until


@pytest.mark.parametrize("killed", [False, True], ids=["block_ended", "sigkilled_inside"])
def test_the_directory_is_removed_however_its_user_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, killed: bool
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read $TMPDIR again
    pid = os.fork()
    if pid == 0:
        try:
            with temporary_directory("crashmatrix-warmup-") as made:
                (Path(made) / "case").mkdir()
                (Path(made) / "case" / "trace.jsonl").write_text("{}\n", encoding="utf-8")
                if killed:
                    os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) == killed  # it really died inside the block
    # The janitor runs on its own once its maker is gone: give it the time a loaded machine takes.
    assert wait_until(lambda: not list(tmp_path.iterdir()), within=10.0), list(tmp_path.rglob("*"))


def test_the_directory_is_there_in_the_block_and_gone_when_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with temporary_directory("crashmatrix-warmup-") as made:
        assert Path(made).parent == tmp_path and Path(made).name.startswith("crashmatrix-warmup-")
        (Path(made) / "f").write_text("x", encoding="utf-8")
    assert not Path(made).exists()  # the janitor was waited for: no later removal to race with
