"""Power loss: the fsync recorder, the truncation, and a power-loss case end to end
(``run_point(..., power_loss=True)``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.lives.power import durable_length, lose_unsynced, parse_sync_log, record_fsyncs

ROOT = Path(__file__).resolve().parents[3]


def test_parse_sync_log_ignores_a_record_cut_short_by_the_kill() -> None:
    assert parse_sync_log(b'{"size": 0}\n{"size": 120}\n{"si') == (0, 120)
    assert parse_sync_log(b"") == ()


def test_durable_length_is_the_size_at_the_last_sync() -> None:
    assert durable_length((0, 100, 250), 400) == 250


def test_durable_length_of_a_never_synced_file_is_zero() -> None:
    assert durable_length((), 400) == 0


def test_durable_length_never_grows_a_file_that_shrank_after_its_sync() -> None:
    assert durable_length((300,), 120) == 120


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    session, log = tmp_path / "session.jsonl", tmp_path / "fsyncs.jsonl"
    session.write_bytes(b"")
    restore = record_fsyncs(session, log)
    try:
        yield session, log
    finally:
        restore()


def test_the_recorder_logs_the_session_size_at_each_fsync(recorded: tuple[Path, Path]) -> None:
    session, log = recorded
    fd = os.open(session, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"one\n")
        os.fsync(fd)
        os.write(fd, b"two\n")
        os.fdatasync(fd)
        os.write(fd, b"three, never synced\n")
    finally:
        os.close(fd)
    assert parse_sync_log(log.read_bytes()) == (4, 8)


def test_the_recorder_ignores_fsyncs_of_other_files(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    _, log = recorded
    with open(tmp_path / "other.txt", "wb") as other:
        other.write(b"x")
        os.fsync(other.fileno())
    assert parse_sync_log(log.read_bytes()) == ()


def test_restore_puts_the_original_fsync_back(tmp_path: Path) -> None:
    original = os.fsync
    restore = record_fsyncs(tmp_path / "s", tmp_path / "log")
    assert os.fsync is not original
    restore()
    assert os.fsync is original


def test_power_loss_truncates_to_the_last_synced_size_and_keeps_the_lost_bytes(tmp_path: Path) -> None:
    session, log, keep = tmp_path / "s.jsonl", tmp_path / "fsyncs.jsonl", tmp_path / "lost.bin"
    session.write_bytes(b"synced\nlost\n")
    log.write_bytes(b'{"size": 7}\n')
    loss = lose_unsynced(session, log, keep=keep)
    assert loss is not None and loss.dropped == 5
    assert session.read_bytes() == b"synced\n"
    assert keep.read_bytes() == b"lost\n"


def test_the_cut_is_logged_so_a_later_loss_never_goes_further_back(tmp_path: Path) -> None:
    session, log = tmp_path / "s.jsonl", tmp_path / "fsyncs.jsonl"
    session.write_bytes(b"a\nb\n")
    log.write_bytes(b'{"size": 2}\n')
    lose_unsynced(session, log)
    with open(session, "ab") as f:
        f.write(b"c\n")  # the next life appends without syncing
    lose_unsynced(session, log)
    assert session.read_bytes() == b"a\n"
    assert parse_sync_log(log.read_bytes())[-1] == 2


def test_power_loss_without_a_session_file_does_nothing(tmp_path: Path) -> None:
    assert lose_unsynced(tmp_path / "absent.jsonl", tmp_path / "log") is None


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
def test_power_loss_changes_nothing_for_an_agent_that_fsyncs_every_line(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    scenario = load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml")
    point = CrashPoint("after_side_effect", "call_mail")
    result = run_point(scenario, point, launcher, tmp_path / "c", power_loss=True)
    assert result.point_id == "power@after_side_effect[call_mail]"
    assert result.passed, result.verdict
    assert not list(result.case_dir.glob("power-lost-*.bin"))


@pytest.mark.slow
def test_power_loss_makes_an_agent_that_never_fsyncs_send_the_email_twice(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    scenario = load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml")
    result = run_point(
        scenario,
        CrashPoint("after_side_effect", "call_mail"),
        launcher,
        tmp_path / "c",
        agent="crashmatrix.reference_agent.mutants:no_fsync",
        power_loss=True,
    )
    assert not result.passed
    assert result.verdict.observed is not None and result.verdict.observed.world["emails"] == 2
    assert (result.case_dir / "power-lost-1.bin").read_bytes()
