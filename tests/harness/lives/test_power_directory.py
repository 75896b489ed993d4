"""Power loss and a new file's directory entry: a session file the life created vanishes
unless its directory was fsynced after the creation (``harness.lives.power``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.casedir import session_path_of
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.lives.power import FAULT_EVENT, cut_power, record_for
from crashmatrix.harness.lives.tracer import read_trace
from crashmatrix.harness.session_file import fsync_directory

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def case(tmp_path: Path) -> Iterator[Path]:
    """A case directory whose life is recording; no session yet."""
    session_path_of(tmp_path).parent.mkdir(parents=True)
    restore = record_for("reference", tmp_path)
    assert restore is not None
    try:
        yield tmp_path
    finally:
        restore()


def _create(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def test_a_session_the_life_created_without_a_directory_fsync_vanishes_whole(case: Path) -> None:
    session = session_path_of(case)
    _create(session, b"synced\n")
    loss = cut_power(case, "reference", 1)
    assert loss is not None and loss.vanished and loss.dropped == 7
    assert not session.exists()
    assert (case / "power-lost-1.bin").read_bytes() == b"synced\n"
    [event] = [e for e in read_trace(case) if e.get("event") == FAULT_EVENT]
    assert "vanished with its 7 bytes" in str(event["detail"])


def test_a_directory_fsync_before_the_file_exists_does_not_hold_its_entry(case: Path) -> None:
    session = session_path_of(case)
    fsync_directory(session.parent)
    _create(session, b"synced\n")
    fsync_directory(case)  # another directory: not the session's
    loss = cut_power(case, "reference", 1)
    assert loss is not None and loss.vanished


def test_a_directory_fsync_after_the_creation_makes_the_session_durable(case: Path) -> None:
    session = session_path_of(case)
    _create(session, b"synced\n")
    fsync_directory(session.parent)
    with open(session, "ab") as f:
        f.write(b"lost\n")
    loss = cut_power(case, "reference", 1)
    assert loss is not None and not loss.vanished and loss.dropped == 5
    assert session.read_bytes() == b"synced\n"


def test_a_session_that_was_there_when_the_life_started_is_durable(case: Path) -> None:
    session = session_path_of(case)
    _create(session, b"synced\n")
    fsync_directory(session.parent)
    cut_power(case, "reference", 1)
    restore = record_for("reference", case)  # life 2: the file is there from the start
    assert restore is not None
    _create(session, b"more\n")
    restore()
    loss = cut_power(case, "reference", 2)
    assert loss is not None and not loss.vanished and not loss.changed
    assert session.read_bytes() == b"synced\nmore\n"


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
