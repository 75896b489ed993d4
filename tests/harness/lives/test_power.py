"""Power loss on the session file: the recorder, the cut back to the last fsync, and a
power-loss case end to end (``run_point(..., power_loss=True)``)."""

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
from crashmatrix.harness.lives.power import SYNC_LOG, cut_power, parse_recording, record_for

ROOT = Path(__file__).resolve().parents[3]


def test_a_log_line_cut_short_by_the_kill_is_ignored() -> None:
    start = {"start": True, "roots": [], "dirs": {}, "files": {}}
    recording = parse_recording(
        (json.dumps(start) + "\n" + json.dumps({"sync": "7", "copy": "a"}) + '\n{"sync": "7", "co').encode()
    )
    assert recording is not None and dict(recording.synced_files) == {"7": "a"}


def test_a_log_without_a_start_is_no_recording() -> None:
    assert parse_recording(b"") is None
    assert parse_recording(b'{"sync": "1", "copy": "a"}\n') is None


@pytest.fixture
def case(tmp_path: Path) -> Iterator[Path]:
    """A case directory whose life is recording: the session exists, created before it."""
    session = session_path_of(tmp_path)
    session.parent.mkdir(parents=True)
    session.write_bytes(b"")
    restore = record_for("reference", tmp_path)
    assert restore is not None
    try:
        yield tmp_path
    finally:
        restore()


def _append(path: Path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
        if sync:
            os.fdatasync(fd) if data.endswith(b"\n\n") else os.fsync(fd)
    finally:
        os.close(fd)


def test_power_loss_cuts_the_session_back_to_its_last_fsync_and_keeps_the_lost_bytes(case: Path) -> None:
    session = session_path_of(case)
    _append(session, b"one\n", sync=True)
    _append(session, b"two\n\n", sync=True)  # through fdatasync
    _append(session, b"three, never synced\n", sync=False)
    loss = cut_power(case, "reference", 1)
    assert loss is not None and loss.dropped == 20 and loss.changed
    assert session.read_bytes() == b"one\ntwo\n\n"
    assert (case / "power-lost-1.bin").read_bytes() == b"three, never synced\n"


def test_the_recorder_ignores_fsyncs_of_files_outside_the_tracked_roots(case: Path) -> None:
    with open(case / "other.txt", "wb") as other:
        other.write(b"x")
        os.fsync(other.fileno())
    recording = parse_recording((case / SYNC_LOG).read_bytes())
    assert recording is not None and not recording.synced_files


def test_restore_puts_the_original_fsync_back(tmp_path: Path) -> None:
    original = os.fsync
    restore = record_for("reference", tmp_path)
    assert restore is not None and os.fsync is not original
    restore()
    assert os.fsync is original


def test_a_later_life_loses_back_to_its_own_start_never_further(case: Path) -> None:
    session = session_path_of(case)
    _append(session, b"a\n", sync=True)
    _append(session, b"b\n", sync=False)
    cut_power(case, "reference", 1)
    restore = record_for("reference", case)  # life 2 starts from what the disk kept
    assert restore is not None
    _append(session, b"c\n", sync=False)
    restore()
    cut_power(case, "reference", 2)
    assert session.read_bytes() == b"a\n"


def test_power_loss_without_a_session_file_or_any_change_does_nothing(tmp_path: Path) -> None:
    restore = record_for("reference", tmp_path)
    assert restore is not None
    restore()
    assert cut_power(tmp_path, "reference", 1) is None


# ---------------------------------------------------------------- the agent's own effects

GOLDEN = ROOT / "tests" / "golden" / "harness_writes" / "adapter.yaml"


def test_a_rollback_of_the_agents_own_world_is_the_harnesss_and_erases_what_it_took(tmp_path: Path) -> None:
    # A kind-2 agent with effects: (its outbox) appends a mail and never syncs it, nor the new
    # file's directory; the power loss takes the file. That is the harness's write: the next
    # life's probe finds nothing new, and the mail the agent appended is erased, not counted.
    from crashmatrix.harness.agents.effects import EFFECT_KIND, HARNESS_KIND, EffectProbe
    from crashmatrix.harness.agents.foreign import load_foreign_adapter
    from crashmatrix.harness.lives.casedir import fresh_case
    from crashmatrix.mock_tools.world import World

    agent = str(GOLDEN)
    adapter = load_foreign_adapter(GOLDEN)
    fresh_case(tmp_path / "case", load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml"))
    case = tmp_path / "case"
    workspace = adapter.workspace(case)

    def probe(where: str) -> None:
        with World(case / "world") as world:
            EffectProbe(adapter.spec.effects, workspace, world, lambda: 0).probe(where)

    restore = record_for(agent, case)
    assert restore is not None
    try:
        (workspace / "outbox.jsonl").write_text('{"to": "a", "call": "call_mail"}\n')
        probe("after_side_effect[call_mail]")
    finally:
        restore()
    loss = cut_power(case, agent, 1)
    assert loss is not None and not (workspace / "outbox.jsonl").exists()
    probe("start of life 2")
    with World(case / "world") as world:
        [sent] = world.events(EFFECT_KIND)
        [took] = world.events(HARNESS_KIND)
    assert (took.detail["by"], took.detail["change"], took.detail["erases"]) == (
        "power_loss",
        "removed",
        sent.seq,
    )


def test_a_rollback_cut_into_a_copy_of_the_crash_is_the_harnesss_there_too(tmp_path: Path) -> None:
    # pytest's power column cuts a copy of P's first crash (``source=``): new inodes, the
    # agent's effect recorded in the original directory. Still one effect, erased by the cut.
    from crashmatrix.harness.agents.effects import EFFECT_KIND, HARNESS_KIND, EffectProbe
    from crashmatrix.harness.agents.foreign import load_foreign_adapter
    from crashmatrix.harness.lives.casedir import clone_case, fresh_case
    from crashmatrix.mock_tools.world import World

    agent = str(GOLDEN)
    adapter = load_foreign_adapter(GOLDEN)
    first, cut = tmp_path / "first", tmp_path / "cut"
    fresh_case(first, load_scenario(ROOT / "scenarios" / "write_file" / "external_change_conflict.yaml"))

    def probe(case: Path, where: str, *, baseline: bool = False) -> None:
        with World(case / "world") as world:
            EffectProbe(adapter.spec.effects, adapter.workspace(case), world, lambda: 0).probe(
                where, baseline=baseline
            )

    probe(first, "start of life 1", baseline=True)  # the seeded notes.txt
    restore = record_for(agent, first)
    assert restore is not None
    try:
        # A file made durable (its bytes and its name) survives, in the copy under new inodes.
        todo = adapter.workspace(first) / "todo.txt"
        with open(todo, "w") as file:
            file.write("kept\n")
            file.flush()
            os.fsync(file.fileno())
        directory = os.open(todo.parent, os.O_RDONLY)
        os.fsync(directory)
        os.close(directory)
        # Written in place, never synced: the power loss puts the draft back.
        (adapter.workspace(first) / "notes.txt").write_text("final\n")
        probe(first, "after_side_effect[call_notes]")
    finally:
        restore()
    clone_case(first, cut)
    assert cut_power(cut, agent, 1, source=first) is not None
    assert (adapter.workspace(cut) / "notes.txt").read_text() == "draft\n"
    probe(cut, "start of life 2")
    with World(cut / "world") as world:
        wrote, kept = world.events(EFFECT_KIND)  # in path order
        changes = [(e.detail["change"], e.detail.get("erases")) for e in world.events(HARNESS_KIND)]
    assert "todo.txt" in kept.detail["identity"] and "notes.txt" in wrote.detail["identity"]
    assert sorted(changes, key=str) == [("added", None), ("removed", wrote.seq)]


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
    assert not list(result.case_dir.glob("power-lost-*"))


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
