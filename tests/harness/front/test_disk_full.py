"""A full disk is one line naming the directory and what to do (issue 26, part K): never an
``sqlite3.OperationalError`` or ``OSError`` traceback, and the harness removes the case
directory it was half writing, so it does not leave the disk full.

The fast tests raise ENOSPC where the harness writes (``cases.guarded``, the world templates);
the slow ones run real cases on a 2 MiB tmpfs that is (almost) full."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.errors import DiskFull, HarnessError
from crashmatrix.harness.front.cases import HARNESS_ERROR_LOG, guarded
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives import casedir
from crashmatrix.harness.lives.casedir import disk_full
from crashmatrix.harness.verdict.result import CaseResult

from ...scenario_data import DATA

SCENARIO = load_scenario(DATA / "email_once.yaml")
ROOT = Path(__file__).resolve().parents[3]
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "world.sqlite-wal")


def _raises(error: BaseException) -> object:
    def run() -> CaseResult:
        raise error

    return run


def _half_written(tmp_path: Path) -> Path:
    case = tmp_path / "work" / "after_running[call_1]"
    (case / "world").mkdir(parents=True)
    (case / "world" / "world.sqlite").write_bytes(b"x" * 1000)
    return case


@pytest.mark.parametrize(
    "error",
    [
        ENOSPC,
        sqlite3.OperationalError("database or disk is full"),
        shutil.Error([("a", "b", f"[Errno 28] {os.strerror(errno.ENOSPC)}: 'b'")]),
        HarnessError("the world could not be opened"),  # ... caused by a full disk, below
    ],
    ids=["ENOSPC", "sqlite", "copytree", "caused"],
)
def test_a_full_disk_is_an_error_case_in_one_line_and_its_half_written_directory_goes(
    tmp_path: Path, error: BaseException
) -> None:
    if isinstance(error, HarnessError):
        error.__cause__ = ENOSPC
    case = _half_written(tmp_path)
    result = guarded(_raises(error), SCENARIO, "after_running[call_1]", "after_running", case, "reference")  # type: ignore[arg-type]
    assert result.verdict.status == "error"
    [problem] = result.verdict.problems
    assert problem == str(
        DiskFull(tmp_path / "work", "the case directory it was writing (after_running[call_1])")
    )
    assert problem.startswith(f"no space left on the disk holding {tmp_path / 'work'}; the harness removed")
    assert "\n" not in problem and "Traceback" not in problem
    assert not case.exists()  # removed, and no harness-error.log written where there is no room
    assert not (case / HARNESS_ERROR_LOG).exists()


def test_another_os_error_is_still_a_harness_error_with_its_log(tmp_path: Path) -> None:
    case = _half_written(tmp_path)
    result = guarded(
        _raises(OSError(errno.EACCES, "Permission denied")), SCENARIO, "clean", "clean", case, "r"
    )  # type: ignore[arg-type]
    assert result.verdict.status == "error"
    assert (case / HARNESS_ERROR_LOG).is_file()  # kept: nothing was full


def test_a_disk_io_error_is_a_full_disk_only_where_the_disk_has_no_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    io_error = sqlite3.OperationalError("disk I/O error")
    assert not disk_full(io_error, tmp_path)  # this disk has room: another I/O error
    monkeypatch.setattr(casedir, "_free_bytes", lambda where: 4096)
    assert disk_full(io_error, tmp_path)  # SQLite's words for a shared-memory file it cannot grow


def test_a_template_the_disk_filled_is_removed_not_left_half_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(case_dir: Path, scenario: object) -> None:
        (case_dir / "world").mkdir(parents=True)
        (case_dir / "world" / "world.json").write_text("{")
        raise ENOSPC

    templates = casedir._Templates()
    templates.base = tmp_path
    monkeypatch.setattr(casedir, "_create_world", full)
    with pytest.raises(OSError):
        templates.get(SCENARIO)
    [root] = tmp_path.iterdir()
    assert list(root.iterdir()) == []  # no half a template for the next case to copy
    templates.remove()


# -- a real full disk -------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (root can mount one), unmounted after the test."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a 2 MiB tmpfs to fill (needs root): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path, leave: int) -> None:
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(disk / "filler", "wb") as filler:
        filler.write(b"\0" * max(0, free - leave))


def _crashmatrix(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crashmatrix.harness.front.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_crashmatrix_run_on_a_full_disk_says_so_in_one_line_and_leaves_nothing(
    small_disk: Path, tmp_path: Path
) -> None:
    _fill(small_disk, leave=0)
    keep = small_disk / "keep"
    done = _crashmatrix(
        "run", str(DATA / "email_once.yaml"), "--crash", "clean", "--keep", str(keep), cwd=tmp_path
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert done.stderr.strip() == (
        f"crashmatrix: no space left on the disk holding {keep}; the harness removed the case directory "
        "it was writing (enumerate): free space there, or run on another disk (crashmatrix run --keep DIR, "
        "pytest --basetemp DIR, or TMPDIR for scratch)"
    )
    assert list(keep.iterdir()) == []


@pytest.mark.slow
def test_cases_that_fill_the_disk_are_errors_in_one_line_and_are_removed(
    small_disk: Path, tmp_path: Path
) -> None:
    # Room for the clean run and a case or two, not for the whole matrix.
    _fill(small_disk, leave=450_000)
    keep = small_disk / "keep"
    done = _crashmatrix("run", str(DATA / "email_once.yaml"), "--keep", str(keep), cwd=tmp_path)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    full = [line for line in done.stdout.splitlines() if "no space left on the disk holding" in line]
    assert full, done.stdout + done.stderr
    for line in full:
        assert line.strip().startswith(
            f"problem: no space left on the disk holding {keep}; the harness removed"
        )
    errored = [
        line.split("::")[1].split(" ")[0] for line in done.stdout.splitlines() if line.endswith("... error")
    ]
    assert errored
    for name in errored:
        assert not (keep / name).exists(), name  # its half-written directory went


def test_a_report_the_disk_cannot_hold_leaves_no_half_written_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crashmatrix.reports.results import Results
    from crashmatrix.reports.writer import write_report

    original = Path.write_text

    def full(self: Path, text: str, *args: object, **kwargs: object) -> int:
        original(self, text[: len(text) // 2], *args, **kwargs)  # type: ignore[arg-type]
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError, match="No space left"):
        write_report(Results("reference", ()), tmp_path / "latest")
    monkeypatch.undo()
    assert list((tmp_path / "latest").iterdir()) == []  # no .matrix.json.tmp kept
    with pytest.raises(OSError, match="No space left"):
        monkeypatch.setattr(Path, "write_text", full)
        write_report(Results("reference", ()), tmp_path / "latest", with_json=False)
    monkeypatch.undo()
    assert list((tmp_path / "latest").iterdir()) == []  # nor .matrix.md.tmp


@pytest.mark.slow
def test_pytest_on_a_full_disk_says_so_in_one_line_per_scenario(small_disk: Path, tmp_path: Path) -> None:
    _fill(small_disk, leave=0)
    options = ["-p", "no:cacheprovider", "-q", "--basetemp", str(small_disk / "bt")]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(DATA / "email_once.yaml"),
            *options,
            "--report-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "Traceback" not in out and "OperationalError" not in out, out
    assert f"no space left on the disk holding {small_disk / 'bt'}" in out, out
    assert "the harness removed the case directory it was writing (enumerate)" in out, out
    left = [p for p in (small_disk / "bt").rglob("*") if p.is_file()]
    assert left == [], left
