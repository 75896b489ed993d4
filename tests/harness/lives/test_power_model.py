"""The per-file persistence model of a power loss (``harness.lives.power``): what a life's
recorded fsyncs make durable in the workspace, the legal outcomes, and the mutant only a
power loss kills (``unsynced_rename``)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.errors import HarnessError
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.casedir import session_path_of
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.lives.power import (
    MAX_SINGLE_OUTCOMES,
    FileChange,
    Node,
    cut_power,
    legal_outcomes,
    power_outcomes,
    record_for,
)
from crashmatrix.harness.session_file import fsync_directory
from crashmatrix.mock_tools.fileops import atomic_write

ROOT = Path(__file__).resolve().parents[3]
WS = "world/workspace"


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    """A case's workspace holding ``a.txt`` ("old") when the life starts recording."""
    ws = tmp_path / WS
    ws.mkdir(parents=True)
    (ws / "a.txt").write_bytes(b"old")
    session = session_path_of(tmp_path)
    session.parent.mkdir()
    session.write_bytes(b"")
    restore = record_for("reference", tmp_path)
    assert restore is not None
    try:
        yield ws
    finally:
        restore()


def _crash(ws: Path, outcome: int = 0) -> dict[str, FileChange]:
    case = ws.parents[1]
    loss = cut_power(case, "reference", 1, outcome)
    assert loss is not None
    return {change.path.removeprefix(WS + "/"): change for change in loss.files}


def _synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def test_a_file_created_without_a_directory_fsync_vanishes(workspace: Path) -> None:
    _synced(workspace / "new.txt", b"synced bytes, entry never synced")
    changes = _crash(workspace)
    assert not (workspace / "new.txt").exists()
    assert changes["new.txt"].what == "vanished"
    assert (workspace.parents[1] / "power-lost-1" / WS / "new.txt").read_bytes().startswith(b"synced")


def test_a_rename_without_a_directory_fsync_leaves_the_old_name_and_content(workspace: Path) -> None:
    os.rename(workspace / "a.txt", workspace / "b.txt")
    _crash(workspace)
    assert (workspace / "a.txt").read_bytes() == b"old"
    assert not (workspace / "b.txt").exists()


def test_write_tmp_fsync_rename_directory_fsync_is_durable(workspace: Path) -> None:
    atomic_write(workspace / "a.txt", b"new")
    loss = cut_power(workspace.parents[1], "reference", 1)
    assert loss is not None and not loss.changed and loss.outcomes == 1
    assert (workspace / "a.txt").read_bytes() == b"new"


def test_an_in_place_rewrite_without_fsync_rolls_back_to_the_start_bytes(workspace: Path) -> None:
    with open(workspace / "a.txt", "r+b") as f:
        f.truncate(0)
        f.write(b"half of the new")
    changes = _crash(workspace)
    assert (workspace / "a.txt").read_bytes() == b"old"
    assert changes["a.txt"] == FileChange(f"{WS}/a.txt", "rolled back", 15, 3)


def test_an_unlink_never_made_durable_comes_back(workspace: Path) -> None:
    (workspace / "a.txt").unlink()
    changes = _crash(workspace)
    assert (workspace / "a.txt").read_bytes() == b"old"
    assert changes["a.txt"].what == "restored"


def test_a_directory_created_in_the_life_vanishes_with_its_contents(workspace: Path) -> None:
    (workspace / "src").mkdir()
    atomic_write(workspace / "src" / "x.py", b"print()")  # synced, its directory too
    changes = _crash(workspace)
    assert not (workspace / "src").exists()
    assert changes["src/"].what == "vanished" and changes["src/x.py"].what == "vanished"


def test_a_renamed_temp_file_never_fsynced_leaves_the_target_empty(workspace: Path) -> None:
    # The ext4 zero-length file: the rename is durable (directory fsynced), the bytes not.
    with open(workspace / ".a.txt.tmp", "wb") as f:
        f.write(b"new")
    os.replace(workspace / ".a.txt.tmp", workspace / "a.txt")
    fsync_directory(workspace)
    changes = _crash(workspace)
    assert (workspace / "a.txt").read_bytes() == b""
    assert changes["a.txt"] == FileChange(f"{WS}/a.txt", "emptied", 3, 0)


def test_a_reused_inode_number_is_another_file(workspace: Path) -> None:
    # atomic_write frees a.txt's old inode; the next file created may get its number.
    # Its bytes must not be taken for the old file's synced ones.
    atomic_write(workspace / "a.txt", b"new")
    for index in range(8):
        (workspace / f"n{index}.txt").write_bytes(b"never synced")
    fsync_directory(workspace)
    _crash(workspace)
    for index in range(8):
        assert (workspace / f"n{index}.txt").read_bytes() == b""


def test_sqlite_files_are_left_as_they_are(workspace: Path) -> None:
    with sqlite3.connect(workspace / "agent.db") as db:
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES (1)")
    db.close()
    before = (workspace / "agent.db").read_bytes()
    changes = _crash(workspace)
    assert (workspace / "agent.db").read_bytes() == before
    assert "agent.db" not in changes


def test_the_outcomes_go_from_only_what_was_synced_to_everything_written(workspace: Path) -> None:
    (workspace / "new.txt").write_bytes(b"x")  # an entry, never synced
    with open(workspace / "a.txt", "ab") as f:
        f.write(b" and more")  # bytes, never synced
    case = workspace.parents[1]
    outcomes = power_outcomes(case)
    assert [o.label for o in outcomes] == [
        "only what was synced (the pessimistic state)",
        f"also the entry of {WS}/new.txt",
        f"also the unsynced bytes of {WS}/a.txt",
        "everything written (a plain SIGKILL's state)",
    ]
    assert outcomes[1].data[f"{WS}/new.txt"] == b""  # an entry may persist without its bytes
    # The last outcome is the crash's own state: choosing it changes nothing.
    loss = cut_power(case, "reference", 1, len(outcomes) - 1)
    assert loss is not None and not loss.changed
    assert (workspace / "a.txt").read_bytes() == b"old and more"


def test_an_outcome_that_does_not_exist_is_refused_with_the_range(workspace: Path) -> None:
    (workspace / "new.txt").write_bytes(b"x")  # its entry, its bytes: none, either, both
    with pytest.raises(
        HarnessError, match=r"power outcome 5 does not exist: this crash has 3 legal outcome\(s\), 0..2"
    ):
        cut_power(workspace.parents[1], "reference", 1, 5)


def test_the_outcomes_are_bounded_and_a_rename_is_one_unit() -> None:
    durable = {f"r/f{i}": Node("f", f"d{i}") for i in range(20)} | {"r/old": Node("f", "moved")}
    crashed = {f"r/f{i}": Node("f", f"c{i}") for i in range(20)} | {"r/new": Node("f", "moved")}
    outcomes = legal_outcomes(durable, crashed, {}, {"moved": b"m"}, roots=["r"])
    assert len(outcomes) == MAX_SINGLE_OUTCOMES + 2
    assert outcomes[0].tree == durable and outcomes[-1].tree == crashed
    # The rename persists whole or not at all: never both names, never neither.
    assert all(("r/old" in o.tree) != ("r/new" in o.tree) for o in outcomes)


def test_nothing_unsynced_is_one_outcome() -> None:
    tree = {"r/a": Node("f", "1")}
    [only] = legal_outcomes(tree, tree, {"1": b"a"}, {"1": b"a"}, roots=["r"])
    assert only.data == {"r/a": b"a"}


# ---------------------------------------------------------------- end to end (forked lives)


@pytest.fixture(scope="module")
def launcher() -> LifeLauncher:
    return LifeLauncher(
        "fork",
        preload=[
            "crashmatrix.harness.agents.reference",
            "crashmatrix.reference_agent.mutants",
            "crashmatrix.mock_tools.toolbox",
        ],
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("agent", "content"),
    [("reference", b"version=2\n"), ("crashmatrix.reference_agent.mutants:unsynced_rename", b"")],
)
def test_a_power_loss_after_a_write_empties_the_file_of_an_agent_that_never_fsyncs_it(
    launcher: LifeLauncher, tmp_path: Path, agent: str, content: bytes
) -> None:
    scenario = load_scenario(ROOT / "scenarios" / "write_file" / "overwrite_existing.yaml")
    point = CrashPoint("after_side_effect", "call_bump")
    # The first life only: what the power loss left, before any recovery rewrites it.
    run = run_case(tmp_path / "c", scenario, launcher, agent=agent, point=point, max_lives=1, power_loss=True)
    assert run.case_dir.joinpath(WS, "config.ini").read_bytes() == content
    # Under a plain SIGKILL the mutant's write is whole: only the power loss tells.
    plain = run_case(tmp_path / "k", scenario, launcher, agent=agent, point=point, max_lives=1)
    assert plain.case_dir.joinpath(WS, "config.ini").read_bytes() == b"version=2\n"


def test_a_file_the_mock_tools_write_into_a_new_directory_survives_with_it(workspace: Path) -> None:
    # atomic_write syncs every directory it creates into its parent (mkdir -p made durable):
    # with a bare mkdir the new directory, and the file in it, vanished at a power loss.
    atomic_write(workspace / "deep" / "er" / "notes.txt", b"kept")
    _crash(workspace)
    assert (workspace / "deep" / "er" / "notes.txt").read_bytes() == b"kept"


def test_a_directory_made_without_syncing_its_parent_vanishes_with_what_it_holds(workspace: Path) -> None:
    (workspace / "deep").mkdir()
    _synced(workspace / "deep" / "notes.txt", b"synced, but its directory is not")
    fsync_directory(workspace / "deep")
    _crash(workspace)
    assert not (workspace / "deep").exists()
