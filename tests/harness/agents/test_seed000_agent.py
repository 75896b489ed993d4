"""ledger-agent (examples/seed000_agent), written from seed 000's lesson alone, judged by the
built-in suite and by its own scenario.

Its recovery is seed 000's table to the letter: an ``approved`` call that never ran goes back
through the Router and is asked again under a NEW execution id (``executions_closed``
accepts the superseded one); ``running`` becomes ``unknown`` under the same id and the
tool's contract decides (write_file again, an order looked up by its original key, an email
never resent); a succeeded call without a Tool Result has its result published from the
ledger. Its two planted bugs (``SEED000_AGENT_BUG``) fail the case with the named check.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.front.cases import run_point, run_tool_fault
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.explain import explain
from crashmatrix.harness.verdict.result import CaseResult

from ...launchers import warm_launcher
from ...matrices import every_point
from ...planted import plant

ROOT = Path(__file__).resolve().parents[3]
HERE = ROOT / "examples" / "seed000_agent"
ADAPTER = HERE / "adapter.yaml"
SESSION = Path("world/workspace/.agent_state/session-seed000.jsonl")  # the agent's own file


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield warm_launcher(ADAPTER)  # openai and its adapter loaded once, not in each life


def _run(scenario: str, point: str, launcher: LifeLauncher, work: Path, agent: Path = ADAPTER) -> CaseResult:
    return run_point(load_scenario(ROOT / scenario), parse_point(point), launcher, work, agent=str(agent))


def _ledger(work: Path, call_id: str) -> list[tuple[str, str]]:
    """(execution_id, status) of the agent's own ledger lines for ``call_id``, in order."""
    lines = [json.loads(line) for line in (work / SESSION).read_text(encoding="utf-8").splitlines()]
    return [
        (line["execution_id"], line["status"])
        for line in lines
        if line.get("type") == "tool_execution" and line["tool_call_id"] == call_id
    ]


@pytest.mark.slow
def test_every_case_of_its_own_scenario_passes(launcher: LifeLauncher, tmp_path: Path) -> None:
    scenario = load_scenario(HERE / "scenario.yaml")
    enumeration, cases = every_point(scenario, launcher, tmp_path, agent=str(ADAPTER))
    clean = enumeration.clean_case()
    assert clean.passed, explain(clean, str(ADAPTER))
    boundaries = {p.boundary for p in enumeration.points}
    assert {"after_approved", "after_running", "after_side_effect", "before_tool_result"} <= boundaries
    for result in cases.values():
        assert result.passed, explain(result, str(ADAPTER))


@pytest.mark.slow
def test_an_approved_call_that_never_ran_is_routed_again_under_a_new_execution_id(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    work = tmp_path / "case"
    result = _run(
        "scenarios/write_file/write_file_recovery.yaml", "after_approved[call_recovery_demo]", launcher, work
    )
    assert result.passed, explain(result, str(ADAPTER))
    ledger = _ledger(work, "call_recovery_demo")
    first, second = ledger[0][0], ledger[1][0]
    assert ledger[0][1] == "approved" and [s for e, s in ledger if e == first] == ["approved"]
    assert second != first  # seed 000: back through the Router, a NEW execution
    assert [s for e, s in ledger if e == second] == ["approved", "running", "succeeded"]
    assert "executions_closed" not in {v.invariant for v in result.verdict.violations}


@pytest.mark.slow
def test_reasked_after_approved_and_refused_the_call_is_rejected_under_a_new_execution(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    work = tmp_path / "case"
    result = _run(
        "scenarios/approvals/reapproval_rejected.yaml", "after_approved[call_desks]", launcher, work
    )
    assert result.passed, explain(result, str(ADAPTER))
    ledger = _ledger(work, "call_desks")
    assert [s for _, s in ledger] == ["approved", "rejected"]
    assert ledger[0][0] != ledger[1][0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario", "point"),
    [
        # running on a non-idempotent send: unknown, surfaced, never sent again
        ("scenarios/send_email/send_once.yaml", "after_side_effect[call_mail]"),
        # succeeded, no Tool Result: the stored result is published, nothing runs again
        ("scenarios/send_email/send_once.yaml", "before_tool_result[call_mail]"),
        # an order left running: looked up by its original key (found), never placed twice
        ("scenarios/create_order/keyed_once.yaml", "after_side_effect[call_order]"),
        # its answer lost, then the process killed while running the retry under the key
        ("scenarios/create_order/keyed_response_lost.yaml", "after_running[call_gadget]"),
    ],
)
def test_key_cases_of_the_builtin_suite_pass(
    scenario: str, point: str, launcher: LifeLauncher, tmp_path: Path
) -> None:
    result = _run(scenario, point, launcher, tmp_path / "case")
    assert result.passed, explain(result, str(ADAPTER))


@pytest.mark.slow
def test_seed000s_write_file_retry_overwrites_a_concurrent_edit_and_the_suite_says_so(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    """Seed 000 re-runs write_file with the same arguments after ``running`` ("原子替换完整
    内容，最终文件状态相同"); seed 004's base/after check would stop on a file someone else
    changed meanwhile. The built-in suite holds the agent to seed 004 there: a real finding
    about seed 000's table, not hidden."""
    result = _run(
        "scenarios/write_file/external_change_conflict.yaml",
        "after_running[call_notes]",
        launcher,
        tmp_path / "c",
    )
    assert not result.passed
    assert {m.field for m in result.verdict.mismatches} >= {"told[call_notes]", "world.files[notes.txt]"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("bug", "point"),
    [
        ("replay_running_send", "after_side_effect[call_mail]"),  # a running email sent again
        ("rerun_succeeded", "before_tool_result[call_mail]"),  # a succeeded email run again
    ],
)
def test_planted_bug_fails_its_case_with_the_check_that_names_it(
    bug: str, point: str, launcher: LifeLauncher, tmp_path: Path
) -> None:
    agent = plant(HERE, "adapter.yaml", "SEED000_AGENT_BUG", bug, tmp_path / "variant")
    result = _run("examples/seed000_agent/scenario.yaml", point, launcher, tmp_path / "case", agent=agent)
    assert not result.passed
    assert "non_idempotent_at_most_once" in {v.invariant for v in result.verdict.violations}
    assert "world.emails" in {m.field for m in result.verdict.mismatches}


@pytest.mark.slow
def test_an_intercepted_tool_takes_the_tool_side_columns_and_a_blind_resend_is_caught(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    """``intercept:`` replaces the agent's send_email by the mock tool, whose tool side the
    columns fail (issue 32): the mail backend dies after the send, the agent's function
    raises as its wire would, and the agent keeps the email ``unknown`` (one email); its
    ``resend_unknown`` twin sends it again at once, red by the invariant alone."""
    scenario = load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml")
    point = parse_point("tool_server_died[call_mail]")
    twin = plant(HERE, "adapter.yaml", "SEED000_AGENT_BUG", "resend_unknown", tmp_path / "variant")
    seen = {}
    for name, agent in (("correct", ADAPTER), ("twin", twin)):
        result = run_tool_fault(scenario, point, launcher, tmp_path / name, agent=str(agent))
        violations = sorted({v.invariant for v in result.verdict.violations})
        seen[name] = (result.verdict.status, result.verdict.observed.world["emails"], violations)
        assert result.verdict.status == "passed" or name == "twin", explain(result, str(agent))
    assert seen == {
        "correct": ("passed", 1, []),
        "twin": ("failed", 2, ["non_idempotent_at_most_once"]),
    }


def test_ledger_agent_knows_nothing_of_crashmatrix() -> None:
    tree = ast.parse((HERE / "agent.py").read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "crashmatrix" not in imported and "openai" in imported
