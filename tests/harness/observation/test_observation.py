"""The Observation seam: a case is read once, and its verdict needs nothing but the value.

The pure parts (coordinate translation of a session the harness edited, the between-lives
record) are tested on values; the seam itself on real crash cases whose directory is gone
by the time they are judged.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.agents.loading import load_adapter, observe
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.trace import LifeRecord
from crashmatrix.harness.core.world_events import WorldEvent
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.observation.observation import (
    BetweenLives,
    Observation,
    WorldView,
    between_lives_from_json,
)
from crashmatrix.harness.observation.reading import read_observation
from crashmatrix.harness.verdict.verdict import judge

ROOT = Path(__file__).resolve().parents[3] / "scenarios"


def _event(seq: int, session_bytes: int) -> WorldEvent:
    return WorldEvent(seq, "email_sent", "send_email", "call_1", "exec_1", "k", session_bytes, {}, 1)


def _observation(events: tuple[WorldEvent, ...], marks: BetweenLives, requests: int = 4) -> Observation:
    return Observation(
        case_dir=Path("/nonexistent"),
        lives=(
            LifeRecord(1, "after_running[call_1]", "crashed", -9, 0.1),
            LifeRecord(2, None, "exited", 0, 0.1),
        ),
        trace=(),
        session=None,
        world=WorldView({"emails": len(events)}, {}, events),
        requests=tuple({"n": n} for n in range(requests)),
        between_lives=marks,
    )


def test_events_before_an_edit_are_moved_by_what_the_edited_lines_grew() -> None:
    # The edited line ended at byte 100 and grew by 7; an event seen at 150 (after that line)
    # moves to 157, one seen at 80 (before it) stays, and one after the edit is already in
    # the edited file's coordinates.
    marks = BetweenLives(events_before=2, requests_before=3, shifts=((100, 7),))
    seen = _observation((_event(1, 80), _event(2, 150), _event(3, 150)), marks)
    assert [e.session_bytes for e in seen.events_in_session_coordinates()] == [80, 157, 150]
    assert seen.requests_for_session() == ({"n": 3},)


def test_without_an_edit_events_and_requests_are_as_recorded() -> None:
    seen = _observation((_event(1, 80),), BetweenLives())
    assert seen.events_in_session_coordinates() == seen.world.events
    assert len(seen.requests_for_session()) == 4
    assert seen.status == "ok"


def test_requests_sent_before_a_power_loss_took_session_lines_are_not_compared() -> None:
    # Requests 0 and 1 went out in the life whose lines the power loss took: they speak of a
    # session that is gone (an edit before the loss counts too: the later mark wins).
    seen = _observation((_event(1, 80),), BetweenLives(session_lost=(2, 1)))
    assert seen.requests_for_session() == ({"n": 2}, {"n": 3})
    both = _observation(
        (_event(1, 80),), BetweenLives(requests_before=1, shifts=((5, 1),), session_lost=(3, 1))
    )
    assert both.requests_for_session() == ({"n": 3},)


def test_the_between_lives_record_keeps_whether_each_fault_acted() -> None:
    marks = between_lives_from_json(
        {
            "requests_before": 2,
            "events_before": 5,
            "shifts": [[120, 3]],
            "applied": [
                {"fault": "external_write", "acted": True, "detail": "wrote a.txt"},
                {"fault": "tamper_arguments", "acted": False, "detail": "no saved tool call call_x"},
            ],
        }
    )
    assert marks.shifts == ((120, 3),)
    assert [(a.fault, a.acted) for a in marks.applied] == [
        ("external_write", True),
        ("tamper_arguments", False),
    ]


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher(
        "fork", preload=["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario_file", "point"),
    [
        ("send_email/send_once.yaml", CrashPoint("after_side_effect", "call_mail")),
        ("faults/create_order_arguments_tampered.yaml", CrashPoint("after_side_effect", "call_chair")),
    ],
    ids=["send_once", "tampered"],
)
def test_a_case_is_judged_from_its_observation_after_its_directory_is_gone(
    launcher: LifeLauncher, tmp_path: Path, scenario_file: str, point: CrashPoint
) -> None:
    scenario = load_scenario(ROOT / scenario_file)
    run = run_case(tmp_path / "case", scenario, launcher, point=point)
    observation = observe(load_adapter("reference"), run)
    before = judge(observation, scenario, point)
    shutil.rmtree(tmp_path / "case")
    after = judge(observation, scenario, point)
    assert before == after
    assert before.passed, [m.describe() for m in before.mismatches] + [v.message for v in before.violations]
    assert observation.session is not None and observation.session.entries
    assert observation.world.events and observation.requests


@pytest.mark.slow
def test_a_tamper_that_finds_no_saved_call_is_recorded_as_not_acting(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    # Killed right after the model replied, before the call was saved: the session holds no
    # call_chair to edit. (A call the script never makes is refused when the file is loaded.)
    scenario = load_scenario(ROOT / "faults" / "create_order_arguments_tampered.yaml")
    run = run_case(tmp_path / "case", scenario, launcher, point=CrashPoint("after_model_reply", "call_chair"))
    applied = read_observation(run).between_lives.applied
    assert [(a.fault, a.acted) for a in applied] == [("tamper_arguments", False)]
    assert "call_chair" in applied[0].detail
