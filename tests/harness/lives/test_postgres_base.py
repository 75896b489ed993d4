"""Where a throwaway cluster's directory goes when the server runs as another user
(``postgres``, under root): somewhere that user can reach (``harness.lives.postgres``)."""

from __future__ import annotations

import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.lives import postgres

# Nobody's ids: the owner of no directory made here, in the group of none.
OTHER = pwd.struct_passwd(("other", "x", 54321, 54321, "", "/nonexistent", "/bin/false"))


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory in /tmp that everyone may pass through (pytest's tmp_path is under a 0700
    directory of its own, out of another user's reach whatever is made in it)."""
    made = Path(tempfile.mkdtemp(prefix="crashmatrix-test-", dir="/tmp"))
    made.chmod(0o755)
    try:
        yield made
    finally:
        shutil.rmtree(made)


def test_a_directory_under_a_private_one_is_not_reachable_by_another_user(open_dir: Path) -> None:
    private = open_dir / "private"
    inner = private / "tmp"
    inner.mkdir(parents=True)
    private.chmod(0o700)
    assert not postgres._reachable(inner, OTHER)
    private.chmod(0o711)  # search permission for others is all it takes
    assert postgres._reachable(inner, OTHER)


def test_the_cluster_goes_to_tmp_when_tmpdir_is_out_of_the_servers_users_reach(
    open_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private = open_dir / "private"
    (private / "tmp").mkdir(parents=True)
    private.chmod(0o700)
    monkeypatch.setattr("tempfile.tempdir", str(private / "tmp"))
    if not postgres._reachable(Path("/tmp"), OTHER):
        pytest.fail("/tmp is not searchable by others on this machine")
    assert postgres._cluster_base(OTHER) == Path("/tmp")
    assert postgres._cluster_base(None) == private / "tmp"  # the server runs as us: $TMPDIR
    private.chmod(0o755)
    assert postgres._cluster_base(OTHER) == private / "tmp"
