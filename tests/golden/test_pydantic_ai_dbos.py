"""golden: PydanticAI's DBOSAgent whose function tool makes its effect in a keyed DBOS step
(issue 29).

tests/golden/pydantic_ai_dbos/mailer.py: ``DBOSAgent`` runs function tools inline in the run's
workflow, so the team's ``send_email`` sends inside a ``@DBOS.step`` of its own, keyed by the
turn's workflow id and the call id and looked up before it sends. The false verdict it pins:
seen only at the tool's edges (all the adapter's toolset brackets give), the tool returns
after the step's row committed, so "after the side effect" would be a moment DBOS replays
from the row; the kill between the send and the row's commit -- where DBOS runs the step
again -- would never be made, and the twin without the lookup would be green. The step's own
seams (``dbos.StepSeams``) make both moments: the mailer is green at each (the re-run step
finds its email), the twin red after the send and green after the row's commit (replayed,
not run).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ..pytest_runs import case_outcomes

pytest.importorskip("pydantic_ai")
pytest.importorskip("dbos")
pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parent / "pydantic_ai_dbos"
SEND_ONCE = ROOT / "scenarios" / "send_email" / "send_once.yaml"
GREEN = (
    "clean",
    "after_model_reply[call_mail]",
    "after_tool_call_saved[call_mail]",
    "after_running[call_mail]",
    "before_tool_result[call_mail]",
    "after_tool_result[call_mail]",
)


def _adapter(tmp_path: Path, factory: str) -> Path:
    shutil.copy(AGENT / "mailer.py", tmp_path / "mailer.py")
    text = (AGENT / "adapter.yaml").read_text(encoding="utf-8").replace("mailer:build", f"mailer:{factory}")
    path = tmp_path / f"{factory}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _send_once(pytester: pytest.Pytester, adapter: Path) -> dict[str, tuple[str, str]]:
    return case_outcomes(pytester, adapter, [SEND_ONCE], "--no-recovery-crashes")["send_once"]


def test_the_keyed_step_is_green_after_its_send_and_after_its_rows_commit(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    mail = case_outcomes(pytester, _adapter(tmp_path, "build"), [SEND_ONCE], "--no-recovery-crashes")[
        "send_once"
    ]
    for case in (*GREEN, "after_side_effect[call_mail]"):
        assert mail[case][0] == "passed", (case, mail[case])


def test_its_twin_is_red_where_dbos_runs_the_step_again_and_only_there(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    mail = _send_once(pytester, _adapter(tmp_path, "build_twin"))
    assert mail["after_side_effect[call_mail]"][0] == "failed", mail
    for case in GREEN:
        assert mail[case][0] == "passed", (case, mail[case])
