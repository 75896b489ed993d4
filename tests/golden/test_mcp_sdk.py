"""golden: an OpenAI Agents SDK agent whose tool is on crashmatrix's MCP server (issue 28).

tests/golden/mcp_sdk/mailer.py gets each MCP tool result as the SDK hands it on, a list of
text parts. crashmatrix read that list as JSON, so the correct agent's clean send was red
("told 'error', but it happened", and ``no_ledger_in_prompt``: request and session spelled the
list apart). Now the text of the parts is what the model was told: the clean case is green,
and so is a send whose answer its client refused (it tells the model the email may have gone
out). Its twin, retrying that send (``max_retry_attempts``), stays red there, and only there
of these two cells.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.front.cases import run_point, run_tool_fault
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.explain import explain
from crashmatrix.harness.verdict.result import CaseResult

pytest.importorskip("agents")
pytest.importorskip("mcp")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parent / "mcp_sdk"
SEND = load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml")
MALFORMED = parse_point("tool_result_malformed[call_mail]")
DEADLINE = 120.0


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher("fork", preload=("agents",))


def _adapter(tmp_path: Path, factory: str) -> str:
    for name in ("mailer.py", "adapter.yaml"):
        shutil.copy(AGENT / name, tmp_path / name)
    data = yaml.safe_load((AGENT / "adapter.yaml").read_text(encoding="utf-8"))
    data["factory"] = f"mailer:{factory}"
    path = tmp_path / f"{factory}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def _clean(launcher: LifeLauncher, adapter: str, where: Path) -> CaseResult:
    return run_point(SEND, None, launcher, where, agent=adapter, deadline=DEADLINE)


def test_its_mcp_results_are_read_as_the_text_the_model_was_shown(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    adapter = _adapter(tmp_path, "build")
    clean = _clean(launcher, adapter, tmp_path / "clean")
    assert clean.passed, explain(clean, adapter)
    assert clean.verdict.observed.told["call_mail"] == "succeeded"
    refused = run_tool_fault(
        SEND, MALFORMED, launcher, tmp_path / "malformed", agent=adapter, deadline=DEADLINE
    )
    assert refused.passed, explain(refused, adapter)
    assert refused.verdict.observed.world["emails"] == 1
    assert refused.verdict.observed.told["call_mail"] == "uncertain"


def test_its_twin_that_retries_a_refused_answer_stays_red(launcher: LifeLauncher, tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, "build_twin")
    clean = _clean(launcher, adapter, tmp_path / "clean")
    assert clean.passed, explain(clean, adapter)
    refused = run_tool_fault(
        SEND, MALFORMED, launcher, tmp_path / "malformed", agent=adapter, deadline=DEADLINE
    )
    assert not refused.passed, explain(refused, adapter)
    assert {v.invariant for v in refused.verdict.violations} == {"non_idempotent_at_most_once"}
    assert refused.verdict.observed.world["emails"] == 2
