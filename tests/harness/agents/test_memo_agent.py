"""memo-agent, an agent written without crashmatrix in mind, against the BUILT-IN suite.

Its tools have other names and arguments (mail, order, save_note), its Tool Results are
plain sentences, its journal has its own vocabulary, it mails through a Maildir it writes
itself and orders over HTTP: examples/memo_agent/adapter.yaml maps all of it
(catalogue:, results:, session:, effects:, services:). These tests prove that the suite's
own scenarios, unchanged, judge it: every case of a few of them passes, and its planted bug
fails the case and the named eval that should catch it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from crashmatrix.harness.agents.loading import fork_preload
from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.front.cases import run_point, run_recovery
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.explain import explain

from ...matrices import every_point

ROOT = Path(__file__).resolve().parents[3]
MEMO = ROOT / "examples" / "memo_agent"
ADAPTER = MEMO / "adapter.yaml"
# One scenario of each tool it has: a mail, a keyed order whose answer is lost, a note
# over an existing file, and an approval refused on the second asking.
SCENARIOS = [
    "send_email/send_once.yaml",
    "create_order/keyed_response_lost.yaml",
    "write_file/overwrite_existing.yaml",
    "approvals/reapproval_rejected.yaml",
]


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    # The server pytest --agent would fork its lives from (collection.launcher_for): the
    # agent's own imports (openai) and its adapter loaded once, not in every life.
    yield LifeLauncher("fork", preload=fork_preload(str(ADAPTER)), warm=(str(ADAPTER),))


@pytest.mark.slow
@pytest.mark.parametrize("name", SCENARIOS)
def test_every_case_of_a_builtin_scenario_passes_with_only_an_adapter(
    name: str, launcher: LifeLauncher, tmp_path: Path
) -> None:
    scenario = load_scenario(ROOT / "scenarios" / name)
    enumeration, cases = every_point(scenario, launcher, tmp_path, agent=str(ADAPTER))
    clean = enumeration.clean_case()
    assert clean.passed, explain(clean, str(ADAPTER))
    assert len(enumeration.points) >= 4, enumeration.points  # the crash points were reached
    for result in cases.values():
        assert result.passed, explain(result, str(ADAPTER))
    # And a second crash while it recovers from the side effect.
    effect = next(p for p in enumeration.points if p.boundary == "after_side_effect")
    result = run_recovery(scenario, effect, launcher, tmp_path / "recovery", agent=str(ADAPTER))
    assert result.passed or result.verdict.status == "not_reached", explain(result, str(ADAPTER))


@pytest.mark.slow
def test_its_planted_bug_sends_the_mail_twice_and_the_suite_says_so(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    data = yaml.safe_load(ADAPTER.read_text(encoding="utf-8"))
    data["python"]["script"] = str(MEMO / "agent.py")
    data["env"] = {**data["env"], "MEMO_AGENT_BUG": "resend_after_crash"}
    buggy = tmp_path / "memo-bug.yaml"
    buggy.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    scenario = load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml")
    result = run_point(
        scenario, parse_point("after_side_effect[call_mail]"), launcher, tmp_path / "c", agent=str(buggy)
    )
    assert not result.passed
    assert "non_idempotent_at_most_once" in {v.invariant for v in result.verdict.violations}
    assert "world.emails" in {m.field for m in result.verdict.mismatches}


def test_memo_agent_knows_nothing_of_crashmatrix() -> None:
    tree = ast.parse((MEMO / "agent.py").read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "crashmatrix" not in imported and "openai" in imported
