"""golden: an OpenAI Agents SDK agent in an adapter YAML, judged only by what it is (issue 27).

tests/golden/agents_sdk/mailer.py never asks for approval, has only send_email, words its
results its own way and never sends an email twice. Each false red the SDK adapter once gave
such an agent is pinned where it was:

* ``outcome`` / ``code`` (crashmatrix's reference vocabulary) are not applicable, with why:
  it was judged against them (26 false reds of the SDK example);
* the approval scenarios are not applicable ("asks no approval"): the adapter forced
  ``needs_approval`` on its tools (8 false reds);
* a scenario needing a suite tool it lacks is not applicable ("the agent has no read_file"):
  it was an error in each case (67);
* its clean runs and a crash past the send are green (one email, in its own outbox).

Its twin that sends again after that crash (the SDK's default behaviour) stays red.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher

from ..pytest_runs import Cases, case_outcomes

pytest.importorskip("agents")
pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parent / "agents_sdk"
SCENARIOS = [
    ROOT / "scenarios" / "send_email" / "send_once.yaml",
    ROOT / "scenarios" / "approvals" / "send_email_rejected.yaml",
    ROOT / "scenarios" / "read_only" / "read_file_plain.yaml",
]
VOCABULARY = "crashmatrix's reference vocabulary; this agent's is results: adapter"


def _adapter(tmp_path: Path, factory: str) -> Path:
    for name in ("mailer.py", "adapter.yaml"):
        shutil.copy(AGENT / name, tmp_path / name)
    data = yaml.safe_load((AGENT / "adapter.yaml").read_text(encoding="utf-8"))
    data["factory"] = f"mailer:{factory}"
    path = tmp_path / f"{factory}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _run(pytester: pytest.Pytester, adapter: Path) -> Cases:
    return case_outcomes(pytester, adapter, SCENARIOS, "--no-recovery-crashes")


def test_judged_only_by_what_it_is_it_is_green(pytester: pytest.Pytester, tmp_path: Path) -> None:
    cases = _run(pytester, _adapter(tmp_path, "build"))
    mail = cases["send_once"]
    for case in (
        "clean",
        "after_model_reply[call_mail]",
        "after_side_effect[call_mail]",
        "after_tool_result[call_mail]",
    ):
        assert mail[case][0] == "passed", (case, mail[case])
    [(outcome, why)] = set(cases["send_email_rejected"].values())
    assert outcome == "skipped" and "this agent asks for none" in why, why
    [(outcome, why)] = set(cases["read_file_plain"].values())
    assert outcome == "skipped" and "the agent has no read_file" in why, why


def test_its_outcome_and_code_are_not_judged_in_crashmatrixs_vocabulary(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, "build")
    result = run_point(
        load_scenario(SCENARIOS[0]),
        parse_point("after_side_effect[call_mail]"),
        LifeLauncher("fork", preload=("agents",)),
        tmp_path / "case",
        agent=str(adapter),
        deadline=60.0,
    )
    verdict = result.verdict
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems
    assert f"outcome: {VOCABULARY}" in verdict.not_applicable
    assert f"code: {VOCABULARY}" in verdict.not_applicable
    assert verdict.observed.world["emails"] == 1


def test_its_twin_that_sends_again_after_the_crash_stays_red(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    cases = _run(pytester, _adapter(tmp_path, "build_twin"))
    assert cases["send_once"]["after_side_effect[call_mail]"][0] == "failed"
    assert cases["send_once"]["clean"][0] == "passed"
