"""Agents that take one user message per process, run through a two-turn scenario
(``create_order/two_orders_two_turns.yaml``) with a real SIGKILL at every point.

``data/turns/order_desk.py`` is a one-shot command-line agent: each start takes ONE message
(its argv, a variable or its whole stdin, read as the script starts), recovers what a killed
start left, then takes the message. Declared five ways (``input.via`` argv / env / stdin with
``per_process: true``, kind 3 and kind 2), it must be green at every point of both turns: a
kill in turn 1 is recovered by the start that brings turn 2 (turn 1 never sent again), a
kill in turn 2 by a start with an empty message. A Python agent's start is a fresh import of
its modules (``desk_session.py`` stops a second start in one process). Its twin, which orders
again under a fresh key when it recovers, is red exactly where an order was placed before the
kill. Stdin stays the user's for approvals; an agent refusing the resume start is told so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crashmatrix.harness.input.suite import BUILTIN_SUITE
from crashmatrix.reports.results import Results, load_results

from ...planted import plant
from ...pytest_runs import run_inprocess

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

TURNS = Path(__file__).resolve().parent / "data" / "turns"
SCENARIO = BUILTIN_SUITE / "create_order" / "two_orders_two_turns.yaml"
# Where an order was placed and its Tool Result not yet saved: a blind re-order doubles it.
PLACED = ("after_side_effect[call_desks]", "after_side_effect[call_chairs]")
# Both turns' crash points a black box's loopback edges reach.
POINTS = {
    f"{edge}[{call}]"
    for edge in ("after_model_reply", "after_running", "after_side_effect")
    for call in ("call_desks", "call_chairs")
}
# For a run whose claim is an error (the doctor, ~1.3 s for each agent not seen yet, only ever
# turns a check "not applicable", never an error into anything else). A red claim keeps the
# doctor, as a team runs it: a check it found blind would leave that case green
# (tests/README.md); so do the green runs.
NO_DOCTOR = ("--no-doctor",)


def _run(pytester: pytest.Pytester, adapter: Path, *select: str) -> Results:
    """``pytest scenarios --agent adapter`` on a copy of the two-turn scenario."""
    target = pytester.path / "scenarios" / SCENARIO.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(SCENARIO, target)
    # Without the tool-side columns: these agents are about turns, and die on a dropped
    # connection like any script that never expected one. Without double resume: they hold
    # no lease, so two processes on one session answer a call twice (red, as they should be).
    result = run_inprocess(
        pytester,
        "scenarios",
        f"--agent={adapter}",
        "-p",
        "no:cacheprovider",
        "--no-tool-side-faults",
        "--no-double-resume",
        *select,
    )
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert results.cases, result.stdout.str()
    return results


@pytest.mark.parametrize("adapter", ["argv.yaml", "env.yaml", "stdin.yaml"])
def test_an_agent_started_once_per_message_is_green_at_every_point_of_both_turns(
    pytester: pytest.Pytester, adapter: str
) -> None:
    results = _run(pytester, TURNS / adapter)
    statuses = {case.point: case.status for case in results.cases}
    # env.yaml is kind 2 with a rule on its own append, installed afresh at each start.
    saved = (
        {f"after_tool_call_saved[{c}]" for c in ("call_desks", "call_chairs")}
        if adapter == "env.yaml"
        else set()
    )
    assert POINTS | saved | {"clean"} <= set(statuses), statuses
    assert set(statuses.values()) == {"passed"}, statuses
    # Every case ends with both orders placed once: neither turn lost, neither sent twice.
    assert all(case.observed and case.observed["world"]["orders"] == 2 for case in results.cases)


@pytest.mark.parametrize("adapter", ["argv_python.yaml", "stdin_python.yaml"])
def test_a_python_agent_started_once_per_message_is_green_where_orders_were_placed(
    pytester: pytest.Pytester, adapter: str
) -> None:
    results = _run(pytester, TURNS / adapter, "-k", "clean or after_side_effect")
    statuses = {case.point: case.status for case in results.cases}
    assert {"clean", *PLACED} <= set(statuses), statuses
    assert set(statuses.values()) == {"passed"}, statuses


@pytest.mark.parametrize("adapter", ["argv.yaml", "env.yaml", "stdin.yaml"])
def test_a_twin_that_orders_again_blindly_is_red_where_an_order_was_placed_before_the_kill(
    pytester: pytest.Pytester, tmp_path: Path, adapter: str
) -> None:
    twin = plant(TURNS, adapter, "ORDER_DESK_BUG", "blind_resend", tmp_path / "twin")
    # The kills the claim is about: not the power losses (kind 2's env.yaml has them), a
    # different fault.
    results = _run(
        pytester,
        twin,
        "--no-power-loss",
        "-k",
        "not recovery and (clean or after_running or after_side_effect)",
    )
    cases = {case.point: case for case in results.cases}
    for point in PLACED:
        assert cases[point].status == "failed", (point, cases[point].status)
        named = {v["invariant"] for v in cases[point].violations}
        assert named == {"non_idempotent_at_most_once"}, (point, cases[point].violations)
        assert cases[point].observed and cases[point].observed["world"]["orders"] == 3
    # Killed before the order was placed, the re-order is the only one: nothing to double.
    for point in ("clean", "after_running[call_desks]", "after_running[call_chairs]"):
        assert cases[point].status == "passed", (point, cases[point].status)


def test_an_agent_run_where_its_files_are_finds_them_in_the_workspace_its_folder_seeds(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    # workspace.yaml: desk_home/ (desk.json, the key prefix it must read) seeds each case.
    results = _run(
        pytester,
        TURNS / "workspace.yaml",
        "-k",
        "clean or (after_side_effect and call_chairs and not recovery)",
    )
    statuses = {case.point: case.status for case in results.cases}
    assert statuses == {"clean": "passed", "after_side_effect[call_chairs]": "passed"}, statuses
    # Without workspace: the same agent finds no desk.json where it runs, and says so.
    bare = tmp_path / "bare.yaml"
    text = (TURNS / "workspace.yaml").read_text(encoding="utf-8")
    bare.write_text(
        text.replace("workspace: desk_home\n", "").replace("{here}", str(TURNS)), encoding="utf-8"
    )
    (clean,) = _run(pytester, bare, *NO_DOCTOR, "-k", "clean").cases
    assert clean.status == "error", clean.status
    assert "no desk.json in" in str(clean), clean


def test_stdin_stays_the_users_for_approvals_when_the_message_comes_in_argv(
    pytester: pytest.Pytester,
) -> None:
    # argv_asks.yaml: it asks before each order on stdin; a denial or end of input is no order.
    results = _run(pytester, TURNS / "argv_asks.yaml", "-k", "clean or (after_side_effect and not recovery)")
    statuses = {case.point: case.status for case in results.cases}
    assert statuses == {"clean": "passed", PLACED[0]: "passed", PLACED[1]: "passed"}, statuses
    assert all(case.observed and case.observed["world"]["orders"] == 2 for case in results.cases)


def test_an_agent_that_refuses_an_empty_message_is_told_it_was_the_resume_start(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    # ORDER_DESK_STRICT=1: an empty message is a usage error (exit 2). A kill in turn 1 needs
    # no resume start (turn 2's start recovers it); a kill in the last turn does.
    strict = plant(TURNS, "argv.yaml", "ORDER_DESK_STRICT", "1", tmp_path / "strict")
    results = _run(pytester, strict, *NO_DOCTOR, "-k", "after_side_effect and not recovery")
    cases = {case.point: case for case in results.cases}
    assert cases[PLACED[0]].status == "passed", cases[PLACED[0]].status
    last = cases[PLACED[1]]
    assert last.status == "error", last.status
    assert "exited with 2 when started with an empty message" in str(last), last
    assert "usage: order-desk MESSAGE" in str(last), last
