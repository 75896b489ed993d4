"""Approvals answered as the scenario says, or honestly not applicable (issue 25, part C).

tests/golden/approvals/agent.py (shell-desk) asks before it acts with two prompts, and only
the first names its tool: ``允许执行 run_bash(npm test)？[y/N]`` and ``允许写入？[y/N]``. A "no"
means the tool is not run and the model is told it was rejected. Run as a user runs the suite
(pytest and the plugin) on every scenario that mentions approvals:

* with its adapter (one regex, the tool named in its 执行 branch; ``approvals.prompts`` ties
  the write prompt to write_file by its text): green in every case of every one, including
  the re-asks after a restart, which its prompts never mark (``approvals_again`` by
  occurrence, remembered in the case directory);
* without ``prompts:``: the write prompt is tied to no tool, and the scenario answers
  write_file otherwise than read_file, so each case is not applicable with the prompt and
  the fix -- never answered by ``*``, never red. The others, whose prompt names the tool,
  stay green. As a black box (kind 3) too: the supervisor kills the agent at the prompt, and
  the case still says why;
* its twin that reads a "no" and runs the tool anyway is red.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from crashmatrix.harness.front.cases import enumerate_points
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher

from ..pytest_runs import Cases, case_outcomes

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parent / "approvals"
# `grep -l approvals scenarios -r`, its YAML files.
APPROVALS = sorted(
    p for p in (ROOT / "scenarios").rglob("*.yaml") if "approvals" in p.read_text(encoding="utf-8")
)
WRITE = "write_file_rejected_then_read"
NPM = ("npm_test_again_no", "npm_test_again_yes")
# Without prompts:, for each case of the write scenario (exact: the message a user reads).
UNNAMED = (
    "not applicable: the agent asked '允许写入？[y/N]', which names no tool, and the scenario's "
    "approvals differ by tool (write_file: no, read_file: yes): any answer could be the one it "
    "forbids; tie the prompt to its tool in adapter shell-desk's approvals.prompts (e.g. prompts: "
    "{<tool>: '<text only that prompt has>'}) or with a (?P<tool>...) group in approvals.prompt "
    "({where})"
)


def _adapter(tmp_path: Path, name: str, change: Any = None) -> Path:
    """adapter.yaml, changed by ``change(data)``, written beside the test's files."""
    data = yaml.safe_load((AGENT / "adapter.yaml").read_text(encoding="utf-8"))
    data["python"]["script"] = str(AGENT / "agent.py")
    if change is not None:
        change(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def _reason(adapter: Path) -> str:
    """UNNAMED for ``adapter``, with where its approvals.prompt is (path:line:col)."""
    lines = adapter.read_text(encoding="utf-8").splitlines()
    line = next(n for n, text in enumerate(lines, 1) if text.startswith("  prompt: ") and "允许" in text)
    return UNNAMED.replace("{where}", f"{adapter}:{line}:3")


def _without_prompts(data: dict[str, Any]) -> None:
    del data["approvals"]["prompts"]


def _run(pytester: pytest.Pytester, adapter: Path, scenarios: list[Path], *args: str) -> Cases:
    return case_outcomes(pytester, adapter, scenarios, *args)


def _named(*stems: str) -> list[Path]:
    return [path for path in APPROVALS if path.stem in stems]


def test_the_agent_is_green_on_every_approval_scenario(pytester: pytest.Pytester, tmp_path: Path) -> None:
    # Without the double-resume column: the agent holds no lease, and two processes on one
    # session are not what approvals are about (tests/harness/lives/test_double_resume_foreign.py).
    cases = _run(pytester, _adapter(tmp_path, "adapter"), APPROVALS, "--no-double-resume")
    assert sorted(cases) == sorted(p.stem for p in APPROVALS)
    failed = {
        f"{s}::{c}" for s, items in cases.items() for c, (outcome, _) in items.items() if outcome != "passed"
    }
    assert failed == set(), failed
    for stem in (WRITE, *NPM):
        # Judged: the clean run, after the approval (asked again: approvals_again by
        # occurrence), while and after it ran, torn writes, power losses, recovery.
        kinds = {case.split("[")[0] for case in cases[stem]}
        assert {
            "clean",
            "after_approved",
            "after_running",
            "torn_write",
            "recovery@after_approved",
        } <= kinds, (
            stem,
            kinds,
        )


def test_without_prompts_the_write_prompt_makes_each_case_not_applicable_with_why(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    adapter = _adapter(tmp_path, "without-prompts", _without_prompts)
    # Power losses, second crashes, double resumes and the tool-side faults would only repeat
    # the same answers, for a minute more (and the agent holds no lease: two processes on its
    # session are red).
    cases = _run(
        pytester,
        adapter,
        APPROVALS,
        "--no-power-loss",
        "--no-recovery-crashes",
        "--no-double-resume",
        "--no-tool-side-faults",
    )
    reason = _reason(adapter)
    assert cases[WRITE] and all(item == ("skipped", reason) for item in cases[WRITE].values()), cases[WRITE]
    # The other prompts name their tool: answered by the scenario, judged, green.
    others = {
        stem: {outcome for outcome, _ in items.values()} for stem, items in cases.items() if stem != WRITE
    }
    assert others == {p.stem: {"passed"} for p in APPROVALS if p.stem != WRITE}
    assert "after_approved[call_tests]" in cases["npm_test_again_no"]


def test_as_a_black_box_the_unanswered_prompt_is_not_applicable_too(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    def black_box(data: dict[str, Any]) -> None:
        _without_prompts(data)
        del data["python"], data["boundaries"]
        data["command"] = ["{python}", "-u", str(AGENT / "agent.py")]

    adapter = _adapter(tmp_path, "black-box", black_box)
    cases = _run(pytester, adapter, _named(WRITE))
    reason = _reason(adapter)
    assert cases[WRITE] and all(item == ("skipped", reason) for item in cases[WRITE].values()), cases[WRITE]
    # One life, ended by the prompt: not an unplanned death restarted until the lives run out.
    [scenario] = _named(WRITE)
    enumeration = enumerate_points(
        load_scenario(scenario), LifeLauncher(), tmp_path / "clean", agent=str(adapter)
    )
    [life] = enumeration.clean.lives
    assert life.status == "error"
    assert life.error.endswith("UnansweredApproval: " + reason.removeprefix("not applicable: "))


def test_its_twin_that_runs_the_tool_after_a_no_stays_red(pytester: pytest.Pytester, tmp_path: Path) -> None:
    def ignores_no(data: dict[str, Any]) -> None:
        data["env"] = {"GOLDEN_APPROVALS_BUG": "ignore_no"}

    # The three cases the claim names, no others: the clean runs and the crash after the tests'
    # approval (42 cases before, every column, for the same three verdicts).
    cases = _run(
        pytester,
        _adapter(tmp_path, "twin", ignores_no),
        _named(WRITE, "npm_test_again_no"),
        "--no-power-loss",
        "--no-recovery-crashes",
        "--no-double-resume",
        "--no-tool-side-faults",
        "-k",
        "clean or (npm_test_again_no and after_approved)",
    )
    # The write rejected up front; the tests rejected when asked again after the approval.
    assert cases[WRITE]["clean"][0] == "failed"
    assert cases["npm_test_again_no"]["after_approved[call_tests]"][0] == "failed"
    assert cases["npm_test_again_no"]["clean"][0] == "passed"  # no "no" there: nothing to ignore
    assert sorted(cases[WRITE]) == ["clean"] and sorted(cases["npm_test_again_no"]) == [
        "after_approved[call_tests]",
        "clean",
    ], cases
