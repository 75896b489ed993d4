"""Torn writes as second crashes while recovering, and every torn fragment's bytes accounted
for (issue 32), on real lives.

* ``closed_mark_first`` (a note of the closed execution synced before the ``unknown`` record)
  passes ``recovery@after_running`` of the email at every boundary second crash, and fails it
  by ``executions_closed`` once the scenario's ``recovery_torn_writes`` tears that record;
* the reference agent cuts a torn tail (set aside beside the session), and a writer that
  appends onto it is failed by ``torn_fragments_accounted``: the note says where the bytes went.

Slow: real lives. One fork server for the module, about 16 lives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.front.cases import run_point, run_recovery
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.explain import explain

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
MUTANT = "crashmatrix.reference_agent.mutants:closed_mark_first"
SCENARIO = load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml")
RUNNING = CrashPoint("after_running", "call_mail")

# A writer that appends onto a torn tail instead of cutting it: the reference agent with its
# writer's repair switched off while it opens the session (a life is one process; it dies).
GLUING = """
from crashmatrix.harness.agents.reference import ReferenceAdapter
from crashmatrix.harness.session_file import SessionWriter
from crashmatrix.reference_agent.agent import Agent


class GluingAgent(Agent):
    def __init__(self, **kwargs):
        repair = SessionWriter._set_aside_torn_tail
        SessionWriter._set_aside_torn_tail = lambda self: None  # the bug: the torn tail stays
        try:
            super().__init__(**kwargs)
        finally:
            SessionWriter._set_aside_torn_tail = repair


class GluingAdapter(ReferenceAdapter):
    agent_class = GluingAgent
    name = "gluing"
"""


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LifeLauncher]:
    here = tmp_path_factory.mktemp("agents")
    (here / "gluing_agent.py").write_text(GLUING, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(here))  # the fork server gets this sys.path
        yield LifeLauncher(
            "fork", preload=["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]
        )


def test_a_note_synced_before_its_record_survives_every_boundary_and_dies_on_the_torn_record(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    without = dataclasses.replace(SCENARIO, recovery_torn_writes=False)
    old = run_recovery(without, RUNNING, launcher, tmp_path / "old", agent=MUTANT, deadline=60.0)
    assert old.passed, old.verdict
    assert old.extra["recovery_points"] == ["before_tool_result[call_mail]", "after_tool_result[call_mail]"]
    new = run_recovery(SCENARIO, RUNNING, launcher, tmp_path / "new", agent=MUTANT, deadline=60.0)
    assert new.verdict.status == "failed"
    assert new.extra["recovery_points"] == [
        "torn_write[call_mail:unknown]",
        "before_tool_result[call_mail]",
        "torn_write[call_mail:tool_result]",
        "after_tool_result[call_mail]",
    ]
    assert new.extra["failed_points"] == ["torn_write[call_mail:unknown]"]
    assert {v.invariant for v in new.verdict.violations} == {"executions_closed"}
    # The torn record itself was cut, as it should be: the bug is the note, not the tail.
    assert any("torn fragment: life 2's torn_write[call_mail:unknown]" in n for n in new.verdict.notes)
    assert ": set_aside: cut from " in explain(new)  # the failure's text says where the bytes went


@pytest.mark.parametrize("second", ["unknown", "tool_result"])
def test_the_reference_agent_sets_its_own_torn_recovery_record_aside(
    launcher: LifeLauncher, tmp_path: Path, second: str
) -> None:
    torn = CrashPoint("torn_write", "call_mail", 1, second)
    result = run_point(SCENARIO, RUNNING, launcher, tmp_path, second=torn, deadline=60.0)
    assert result.passed, result.verdict
    assert result.observation is not None
    (fate,) = result.observation.torn_fragments
    assert (fate.fragment.life, fate.fragment.label, fate.fate) == (2, second, "set_aside")
    assert (result.case_dir / "world" / "workspace" / ".agent_state").joinpath(
        fate.where.rpartition(" kept in ")[2]
    ).read_bytes() == fate.fragment.data


def test_a_writer_that_appends_onto_a_torn_tail_is_failed_by_the_fragment_invariant(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    torn = CrashPoint("torn_write", "call_mail", 1, "running")
    result = run_point(SCENARIO, torn, launcher, tmp_path, agent="gluing_agent:GluingAdapter", deadline=60.0)
    assert result.verdict.status == "failed"
    (broken,) = [v for v in result.verdict.violations if v.invariant == "torn_fragments_accounted"]
    assert "life 1's torn_write[call_mail:running]" in broken.message
    assert "runs on into other bytes" in broken.message
    assert result.observation is not None
    assert [f.fate for f in result.observation.torn_fragments] == ["glued"]
    assert "torn fragment: life 1's torn_write[call_mail:running]" in explain(result)
