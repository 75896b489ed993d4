"""Power loss and torn writes on foreign agents (issue 15: every fault mode asserts it acted).

Kind 2 (examples/python_agent, imported in our process): a power loss cuts its own JSONL
session back to its last fsync, so a copy that never fsyncs FAILS a power case where the
real one passes; its session appends are torn at its fsyncs, so its torn-write points are
listed and judged. Kind 3 (examples/blackbox_agent, a separate process): its fsyncs are not
visible, so a power case is not applicable with the reason; its last line is torn by the
supervisor at its next request. A SQLite session cannot be torn, and says why.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from crashmatrix.harness.agents.foreign import load_foreign_adapter
from crashmatrix.harness.agents.foreign_session import AppendWatch, LedgerMap, tear_last_line
from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.front.cases import enumerate_points, run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.lives.tracer import read_trace
from crashmatrix.harness.verdict.explain import explain

from ...launchers import warm_launcher

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NOTES = EXAMPLES / "python_agent"
ORDER_DESK = EXAMPLES / "blackbox_agent"
RUNNING = parse_point("after_running[call_write]")


def _copy_of_notes_agent(where: Path, *, edit: tuple[str, str]) -> Path:
    """examples/python_agent with one edit of its source, beside an adapter file that runs
    the copy (a planted variant: the example itself stays correct)."""
    where.mkdir(parents=True)
    source = (NOTES / "agent.py").read_text(encoding="utf-8")
    old, new = edit
    assert old in source, f"examples/python_agent/agent.py no longer has {old!r}"
    (where / "agent.py").write_text(source.replace(old, new, 1), encoding="utf-8")
    shutil.copy(NOTES / "adapter.yaml", where / "adapter.yaml")
    return where / "adapter.yaml"


# append_entry's fsync (the first one in the file: drop_torn_tail's comes after it).
NEVER_FSYNCS = ("        file.flush()\n        os.fsync(file.fileno())\n", "        file.flush()\n")
GLUES_TO_A_TORN_TAIL = ("    drop_torn_tail(session)\n", "")


def _faults(case_dir: Path) -> list[dict[str, object]]:
    return [event for event in read_trace(case_dir) if event.get("event") == "fault"]


@pytest.fixture(scope="module")
def launcher() -> LifeLauncher:
    # python_agent's imports (openai) once, not in each life; the black box is its own program.
    return warm_launcher(NOTES / "adapter.yaml", preload=["crashmatrix.harness.agents.foreign"])


# -- power loss --------------------------------------------------------------------------------


@pytest.mark.slow
def test_power_loss_fails_a_kind_2_agent_that_never_fsyncs_its_session(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    # The silent green of issue 15: power@ passed for an agent that never fsyncs.
    agent = str(_copy_of_notes_agent(tmp_path / "agent", edit=NEVER_FSYNCS))
    scenario = load_scenario(NOTES / "scenario.yaml")
    result = run_point(scenario, RUNNING, launcher, tmp_path / "case", agent=agent, power_loss=True)
    assert result.point_id == "power@after_running[call_write]"
    assert result.verdict.status == "failed", explain(result, agent)
    # Nothing it wrote survived: the restarted agent started the turn again from nothing.
    assert "ledger[call_write]" in {m.field for m in result.verdict.mismatches}, explain(result, agent)
    [fault] = _faults(result.case_dir)
    assert fault["fault"] == "power_loss" and fault["acted"] is True
    assert int(str(fault["dropped"])) > 0
    assert b'"status":"running"' in (result.case_dir / "power-lost-1.bin").read_bytes()


@pytest.mark.slow
def test_the_same_kind_2_agent_fsyncing_every_line_passes_the_power_case(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    agent = str(NOTES / "adapter.yaml")
    scenario = load_scenario(NOTES / "scenario.yaml")
    result = run_point(scenario, RUNNING, launcher, tmp_path / "case", agent=agent, power_loss=True)
    assert result.passed, explain(result, agent)
    # The proof the fault happened (visible fsyncs, nothing unsynced), with the verdict.
    assert any(
        note.startswith("power_loss: notes-agent.jsonl was fully synced at the crash")
        for note in result.verdict.notes
    ), result.verdict.notes
    assert not list(result.case_dir.glob("power-lost-*.bin"))


@pytest.mark.slow
def test_a_power_case_on_a_black_box_is_not_applicable_with_the_reason(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    agent = str(ORDER_DESK / "adapter.yaml")
    scenario = load_scenario(ORDER_DESK / "scenario.yaml")
    point = parse_point("after_running[call_order]")
    result = run_point(scenario, point, launcher, tmp_path / "case", agent=agent, power_loss=True)
    assert result.verdict.status == "not_applicable", explain(result, agent)
    assert (
        "power_loss did not act: a black box's fsyncs are not visible to the harness"
        in (result.verdict.problems[0])
    )
    assert any(
        text.startswith("between_lives.power_loss did not act") for text in result.verdict.not_applicable
    )


# -- torn writes -------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_kind_2_jsonl_agent_lists_its_torn_writes_and_survives_them(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    # The silent green of issue 15: torn-write points were never listed for foreign agents.
    agent = str(NOTES / "adapter.yaml")
    scenario = load_scenario(NOTES / "scenario.yaml")
    enumeration = enumerate_points(scenario, launcher, tmp_path / "enumerate", agent=agent)
    torn = [point.id for point in enumeration.points if point.boundary == "torn_write"]
    assert torn == [
        f"torn_write[call_write:{label}]" for label in ("approved", "running", "succeeded", "tool_result")
    ]
    result = run_point(scenario, parse_point(torn[1]), launcher, tmp_path / "case", agent=agent)
    assert result.passed, explain(result, agent)
    [fault] = _faults(result.case_dir)
    assert fault["fault"] == "torn_write" and fault["acted"] is True
    assert str(fault["detail"]).startswith("cut the last line of notes-agent.jsonl")
    # The trace: the append announced, the tracer's half line in its scratch file (a torn
    # event), the death there (the timeline marks it torn), then the harness's cut of the
    # agent's own line after the life: its torn event (the life's last: its tear, whose
    # fragment is followed into the final session) and the fault.
    trace = read_trace(result.case_dir)
    events = [(e.get("event"), e.get("label")) for e in trace if e.get("life") == 1]
    assert events[-5:] == [
        ("append", "running"),
        ("torn", "running"),
        ("crash", None),
        ("torn", "running"),
        ("fault", None),
    ]
    tear = [e for e in trace if e.get("life") == 1 and e.get("event") == "torn"][-1]
    assert tear["path"].endswith("/notes-agent.jsonl") and bytes.fromhex(tear["fragment"])


@pytest.mark.slow
def test_a_torn_case_is_judged_an_agent_that_appends_after_a_torn_tail_fails_it(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    agent = str(_copy_of_notes_agent(tmp_path / "agent", edit=GLUES_TO_A_TORN_TAIL))
    scenario = load_scenario(NOTES / "scenario.yaml")
    point = parse_point("torn_write[call_write:running]")
    result = run_point(scenario, point, launcher, tmp_path / "case", agent=agent)
    assert not result.passed
    # Its next line was glued to the torn half: a corrupt line, named by file and line.
    assert any("notes-agent.jsonl:4" in problem for problem in result.verdict.problems), explain(
        result, agent
    )


@pytest.mark.slow
def test_a_black_box_has_its_last_line_cut_after_the_kill(launcher: LifeLauncher, tmp_path: Path) -> None:
    agent = str(ORDER_DESK / "adapter.yaml")
    scenario = load_scenario(ORDER_DESK / "scenario.yaml")
    point = parse_point("torn_write[call_order:running]")
    result = run_point(scenario, point, launcher, tmp_path / "case", agent=agent)
    assert result.passed, explain(result, agent)
    [fault] = _faults(result.case_dir)
    assert fault["acted"] is True and "cut the last line of session.jsonl" in str(fault["detail"])


def test_a_sqlite_or_unreadable_session_cannot_be_torn_and_says_why() -> None:
    state = load_foreign_adapter(EXAMPLES / "state_agent" / "adapter.yaml")
    assert not state.tears_writes
    assert "SQLite database" in state.torn_write_unreachable
    unreadable = load_foreign_adapter(EXAMPLES / "state_agent" / "adapter-unreadable.yaml")
    assert not unreadable.tears_writes
    assert "readable: false" in unreadable.torn_write_unreachable
    notes = load_foreign_adapter(NOTES / "adapter.yaml")
    assert notes.tears_writes and notes.torn_write_unreachable == ""


# -- the pieces, without lives -----------------------------------------------------------------


def test_the_watch_offers_only_the_last_line_appended_since_it_last_looked(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.write_bytes(b'{"type":"message","message":{"role":"user","content":"hi"}}\n')
    watch = AppendWatch(session, LedgerMap())  # what an earlier life wrote is not offered
    assert watch.last_new_line() is None
    approved = b'{"type":"tool_execution","tool_call_id":"c1","execution_id":"e1","status":"approved"}\n'
    running = approved.replace(b"approved", b"running")
    with open(session, "ab") as out:
        out.write(approved + running)
    line = watch.last_new_line()
    assert line is not None and b'"status": "running"' in line and line.endswith(b"\n")
    assert watch.last_new_line() is None  # offered once
    with open(session, "ab") as out:
        out.write(b'{"type":"tool_execution","tool_call_id":"c1"')  # still being written
    assert watch.last_new_line() is None


def test_the_watch_reads_a_foreign_vocabulary_and_skips_lines_it_does_not_judge(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    watch = AppendWatch(session, LedgerMap(type_field="kind", ledger_type="ledger"))
    session.write_bytes(b'{"kind":"ledger","callId":"c1","stepId":"s1","status":"started"}\n')
    line = watch.last_new_line()
    assert line is not None and b'"tool_call_id": "c1"' in line and b'"status": "running"' in line
    with open(session, "ab") as out:
        out.write(b'{"kind":"meta","note":"not judged"}\n')
    assert watch.last_new_line() is None


def test_tearing_keeps_half_of_the_last_line_as_the_tracer_does(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.write_bytes(b"first\n0123456789\n")  # the last line is 11 bytes with its newline
    assert tear_last_line(session) == (6, 5)
    assert session.read_bytes() == b"first\n01234"
    assert tear_last_line(session) is None  # no complete last line left
    assert tear_last_line(tmp_path / "absent.jsonl") is None


def test_a_planted_variant_is_a_copy_the_example_stays_as_it_is(tmp_path: Path) -> None:
    adapter = _copy_of_notes_agent(tmp_path / "a", edit=NEVER_FSYNCS)
    copied = (adapter.parent / "agent.py").read_text(encoding="utf-8")
    assert (
        copied.count("os.fsync(") == (NOTES / "agent.py").read_text(encoding="utf-8").count("os.fsync(") - 1
    )
    assert yaml.safe_load(adapter.read_text(encoding="utf-8"))["python"]["script"] == "agent.py"
