"""golden: a PydanticAI agent in an adapter YAML that asks before it sends (issue 29).

tests/golden/pydantic_ai/mailer.py has only send_email, with ``requires_approval=True``; it
writes its own outbox, keeps a ledger of its own in its tool and never sends an email twice.
Its ``results:`` rules know its own tool's words only. Each false verdict the PydanticAI
adapter could give such an agent is pinned:

* the person's no, which crashmatrix words for a framework agent (code REJECTED), was read by
  the team's ``{default: succeeded}`` rule: "told succeeded, but the world holds no side
  effect" in every case of ``send_email_rejected`` (now read as rejected before the team's
  rules, ``ForeignAdapter._as_framework``);
* the run parked for approval and saved (``after_tool_call_saved``), the answer given
  (``after_approved``): green, asked again in the next life, one email;
* a scenario needing a suite tool it lacks is not applicable ("the agent has no read_file").

Its twin, the tool as PydanticAI's docs show it, sends again after a crash past the send:
red there, and only there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ..pytest_runs import Cases, case_outcomes

pytest.importorskip("pydantic_ai")
pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parent / "pydantic_ai"
SCENARIOS = [
    ROOT / "scenarios" / "send_email" / "send_once.yaml",
    ROOT / "scenarios" / "approvals" / "send_email_rejected.yaml",
    ROOT / "scenarios" / "read_only" / "read_file_plain.yaml",
]
SEND_ONCE = (
    "clean",
    "after_model_reply[call_mail]",
    "after_tool_call_saved[call_mail]",
    "after_approved[call_mail]",
    "after_running[call_mail]",
    "after_tool_result[call_mail]",
)


def _adapter(tmp_path: Path, factory: str) -> Path:
    for name in ("mailer.py", "adapter.yaml"):
        shutil.copy(AGENT / name, tmp_path / name)
    data = yaml.safe_load((AGENT / "adapter.yaml").read_text(encoding="utf-8"))
    data["factory"] = f"mailer:{factory}"
    if factory == "build_twin":
        del data["boundaries"]  # no ledger: after_running is the adapter's own, before its function
    path = tmp_path / f"{factory}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _run(pytester: pytest.Pytester, adapter: Path) -> Cases:
    return case_outcomes(pytester, adapter, SCENARIOS, "--no-recovery-crashes")


def test_an_agent_that_asks_and_keeps_a_ledger_is_green(pytester: pytest.Pytester, tmp_path: Path) -> None:
    cases = _run(pytester, _adapter(tmp_path, "build"))
    mail = cases["send_once"]
    for case in (*SEND_ONCE, "after_side_effect[call_mail]"):
        assert mail[case][0] == "passed", (case, mail[case])
    rejected = cases["send_email_rejected"]
    for case in ("clean", "after_model_reply[call_board]", "after_tool_call_saved[call_board]"):
        assert rejected[case][0] == "passed", (case, rejected[case])
    [(outcome, why)] = set(cases["read_file_plain"].values())
    assert outcome == "skipped" and "the agent has no read_file" in why, why


def test_its_twin_that_sends_again_after_the_crash_stays_red(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    cases = _run(pytester, _adapter(tmp_path, "build_twin"))
    mail = cases["send_once"]
    assert mail["after_side_effect[call_mail]"][0] == "failed"
    for case in SEND_ONCE:
        assert mail[case][0] == "passed", (case, mail[case])
