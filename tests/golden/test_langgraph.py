"""golden: a LangGraph agent in an adapter YAML, judged only by what it is (issue 27).

tests/golden/langgraph/mailer.py has only send_email, writes its own outbox, keeps a ledger of
its own in its tool and never sends an email twice. Each false red the LangGraph adapter once
gave such an agent is pinned where it was:

* a scenario needing a suite tool it lacks is not applicable ("the agent has no read_file"):
  the adapter ran every suite tool as its own (265 of a correct-enough agent's 274 reds);
* under LangGraph's default async durability, killed once its reply was saved
  (``after_tool_call_pending``, ``after_tool_call_saved``) it is green: LangGraph starts the
  ToolNode while that checkpoint is still being written, and its ledger row landed before the
  kill (22 such reds of ``build_fixed`` in a loaded matrix run; the adapter now holds the
  ToolNode until the checkpoint's boundaries passed). That race rarely shows in a run this
  small: ``test_a_toolnode_is_held_until_the_reply_it_runs_is_checkpointed``
  (tests/harness/agents/frameworks/test_langgraph.py) pins the hold itself;
* its clean run and every other crash of ``send_once`` are green (one email, in its outbox).

Its twin, the tool as LangGraph's docs show it, sends again after a crash past the send:
red there, and only there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ..pytest_runs import Cases, case_outcomes

pytest.importorskip("langgraph")
pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parent / "langgraph"
SCENARIOS = [
    ROOT / "scenarios" / "send_email" / "send_once.yaml",
    ROOT / "scenarios" / "read_only" / "read_file_plain.yaml",
]


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
        "after_tool_call_pending[call_mail]",
        "after_tool_call_saved[call_mail]",
        "after_running[call_mail]",
        "after_side_effect[call_mail]",
        "before_tool_result[call_mail]",
        "after_tool_result[call_mail]",
    ):
        assert mail[case][0] == "passed", (case, mail[case])
    [(outcome, why)] = set(cases["read_file_plain"].values())
    assert outcome == "skipped" and "the agent has no read_file" in why, why


def test_its_twin_that_sends_again_after_the_crash_stays_red(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    cases = _run(pytester, _adapter(tmp_path, "build_twin"))
    mail = cases["send_once"]
    assert mail["after_side_effect[call_mail]"][0] == "failed"
    assert mail["clean"][0] == "passed"
    assert mail["after_tool_call_saved[call_mail]"][0] == "passed"
