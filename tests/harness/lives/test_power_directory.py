"""Power loss and a new file's directory entry: a session file the life created vanishes
unless its directory was fsynced after the creation (``harness.lives.power``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.lives.power import (
    FAULT_EVENT,
    directory_entry_durable,
    lose_unsynced,
    parse_sync_log,
    record_fsyncs,
)
from crashmatrix.harness.session_file import fsync_directory

ROOT = Path(__file__).resolve().parents[3]


def _log(*records: dict[str, object]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


# ---------------------------------------------------------------- the pure decision


def test_a_file_the_life_created_without_a_directory_fsync_is_not_durable() -> None:
    assert not directory_entry_durable(_log({"start": True, "existed": False}, {"size": 0}, {"size": 40}))


def test_a_directory_fsync_after_the_creation_makes_the_entry_durable() -> None:
    assert directory_entry_durable(_log({"start": True, "existed": False}, {"size": 0}, {"dir": True}))


def test_a_file_that_was_there_when_the_life_started_is_durable() -> None:
    assert directory_entry_durable(_log({"start": True, "existed": True}, {"size": 40}))


def test_only_the_last_life_counts() -> None:
    # A directory sync of an earlier life says nothing of the file this life created anew.
    log = _log(
        {"start": True, "existed": False},
        {"dir": True},
        {"size": 0, "power_loss": True, "vanished": True},
        {"start": True, "existed": False},
        {"size": 12},
    )
    assert not directory_entry_durable(log)


def test_a_log_without_a_start_keeps_the_file_as_before() -> None:
    assert directory_entry_durable(_log({"size": 3}))
    assert directory_entry_durable(b"")


def test_a_directory_record_cut_short_by_the_kill_does_not_count() -> None:
    assert not directory_entry_durable(_log({"start": True, "existed": False}) + b'{"dir": tr')


def test_start_and_directory_records_are_not_sizes() -> None:
    assert parse_sync_log(_log({"start": True, "existed": False}, {"size": 4}, {"dir": True})) == (4,)


# ---------------------------------------------------------------- the recorder and the cut


def test_the_recorder_logs_the_start_and_a_directory_fsync_after_the_creation(tmp_path: Path) -> None:
    session, log = tmp_path / "s" / "session.jsonl", tmp_path / "fsyncs.jsonl"
    session.parent.mkdir()
    restore = record_fsyncs(session, log)
    try:
        fsync_directory(session.parent)  # before the file exists: holds no entry of it
        session.write_bytes(b"one\n")
        fsync_directory(tmp_path)  # another directory: not the session's
        assert not directory_entry_durable(log.read_bytes())
        fsync_directory(session.parent)
    finally:
        restore()
    records = [json.loads(line) for line in log.read_bytes().splitlines()]
    assert records == [{"start": True, "existed": False}, {"dir": True}]
    assert directory_entry_durable(log.read_bytes())


def test_power_loss_removes_a_file_whose_entry_never_became_durable(tmp_path: Path) -> None:
    session, log, keep = tmp_path / "s.jsonl", tmp_path / "fsyncs.jsonl", tmp_path / "lost.bin"
    session.write_bytes(b"synced\n")
    log.write_bytes(_log({"start": True, "existed": False}, {"size": 7}))
    loss = lose_unsynced(session, log, keep=keep)
    assert loss is not None and loss.vanished and loss.dropped == 7
    assert not session.exists()
    assert keep.read_bytes() == b"synced\n"
    # The next life finds no file: it starts from nothing, and says so in its start record.
    restore = record_fsyncs(session, log)
    restore()
    assert not directory_entry_durable(log.read_bytes())


def test_power_loss_keeps_a_file_whose_directory_was_synced(tmp_path: Path) -> None:
    session, log = tmp_path / "s.jsonl", tmp_path / "fsyncs.jsonl"
    session.write_bytes(b"synced\nlost\n")
    log.write_bytes(_log({"start": True, "existed": False}, {"size": 0}, {"dir": True}, {"size": 7}))
    loss = lose_unsynced(session, log)
    assert loss is not None and not loss.vanished
    assert session.read_bytes() == b"synced\n"


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


def _power_event(case_dir: Path) -> dict[str, object]:
    events = [json.loads(line) for line in (case_dir / "trace.jsonl").read_text().splitlines() if line]
    (event,) = [e for e in events if e.get("event") == FAULT_EVENT and e.get("fault") == "power_loss"]
    return event


@pytest.mark.slow
@pytest.mark.parametrize(
    ("agent", "vanishes"),
    [("reference", False), ("crashmatrix.reference_agent.mutants:no_directory_fsync", True)],
)
def test_a_power_loss_takes_the_whole_session_of_an_agent_that_never_fsyncs_its_directory(
    launcher: LifeLauncher, tmp_path: Path, agent: str, vanishes: bool
) -> None:
    scenario = load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml")
    point = CrashPoint("after_side_effect", "call_mail")
    result = run_point(scenario, point, launcher, tmp_path / "c", agent=agent, power_loss=True)
    event = _power_event(result.case_dir)
    assert event["acted"] is True
    assert ("vanished" in str(event["detail"])) is vanishes
    assert result.passed is not vanishes, result.verdict
    lost = result.case_dir / "power-lost-1.bin"
    if vanishes:
        assert result.verdict.observed is not None and result.verdict.observed.world["emails"] == 2
        assert lost.read_bytes().count(b"\n") >= 3  # every line of life 1, synced or not
    else:
        assert not lost.exists()
