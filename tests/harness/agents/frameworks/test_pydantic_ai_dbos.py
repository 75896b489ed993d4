"""PydanticAI's ``DBOSAgent`` through the PydanticAI adapter (``framework: pydantic-ai``): each
turn a DBOS workflow under a fixed id (``turn-N``), resumed in the next life by
``DBOS.launch()``'s recovery, the boundaries from DBOS's step rows (``dbos.StepSeams``) as well
as from the agent's function toolsets. The docs' DBOSAgent (``examples/pydantic_ai_team/
dbos_agent.py``: function tools inline) sends the email twice after a crash past the send --
the recovered run replays the model's reply from its step row and runs the tool again -- and
is green everywhere else; ``dbos_fixed.py`` (each effect a keyed ``@DBOS.step``) is green at
every first crash."""

from __future__ import annotations

import base64
import pickle
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("dbos")

from crashmatrix.harness.agents.frameworks import dbos as dbos_adapter
from crashmatrix.harness.agents.frameworks import pydantic_ai as pai
from crashmatrix.harness.agents.loading import load_adapter

from ....pytest_runs import case_outcomes

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[4]
TEAM = ROOT / "examples" / "pydantic_ai_team"
SCENARIOS = [
    ROOT / "scenarios" / "send_email" / "send_once.yaml",
    ROOT / "scenarios" / "create_order" / "keyed_once.yaml",
]
CALLS = {"send_once": "call_mail", "keyed_once": "call_order"}


def _row(workflow: str, step: int, output: object) -> dict[str, object]:
    """A step's row as DBOS hands it to ``record_operation_result`` (its default serializer)."""
    encoded = base64.b64encode(pickle.dumps(output)).decode()
    return {"workflow_uuid": workflow, "function_id": step, "output": encoded, "error": None}


def test_a_tool_steps_effect_and_its_rows_commit_are_two_moments_and_a_replys_row_saves_its_calls() -> None:
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

    fired: list[tuple[str, str]] = []
    running = {"email_step": "call_mail"}
    seams = dbos_adapter.StepSeams(lambda b, c: fired.append((b, c)), running.get, pai._reply_calls)
    # Outside a workflow DBOS names no workflow or step: the row is matched as ("", 0).
    assert seams.bracket("email_step", lambda: "sent")() == "sent"
    assert fired == [("after_side_effect", "call_mail")]
    seams.committed(_row("", 0, "sent"))
    assert fired[-1] == ("before_tool_result", "call_mail")
    assert seams.stepped == {"call_mail"}
    reply = ModelResponse(parts=[TextPart("ok"), ToolCallPart("send_email", {}, tool_call_id="c1")])
    seams.committed(_row("turn-1", 1, reply))
    assert fired[-1] == ("after_tool_call_saved", "c1")
    seams.committed(_row("turn-1", 3, ModelResponse(parts=[TextPart("Done.")])))  # the final answer
    seams.committed({**_row("turn-1", 4, None), "output": None, "error": "boom"})
    assert len(fired) == 3


def test_a_dbos_agent_reaches_dboss_step_rows_and_loads_again_in_one_process() -> None:
    first = load_adapter(str(TEAM / "adapter_dbos.yaml"))
    again = load_adapter(str(TEAM / "adapter_dbos.yaml"))  # its workflows registered once each
    assert {"after_tool_call_saved", "before_tool_result"} <= set(first.boundaries)
    assert "before_tool_result" not in first.unreachable  # type: ignore[attr-defined]
    assert first.boundaries == again.boundaries
    plain = load_adapter(str(TEAM / "adapter.yaml"))
    assert "before_tool_result" not in plain.boundaries


# Slow tests, one scenario each (the whole matrix is docs/frameworks.md's measured run): the
# email sent twice by the docs' agent; the order kept one by the fixed one's keyed step (its
# keyed email step is the golden tests/golden/test_pydantic_ai_dbos.py's).


@pytest.mark.slow
def test_the_dbos_agents_recovered_run_sends_again_past_the_effect_and_only_there(
    pytester: pytest.Pytester,
) -> None:
    cases = case_outcomes(pytester, TEAM / "adapter_dbos.yaml", SCENARIOS[:1], "--no-recovery-crashes")
    outcomes = {case: outcome for case, (outcome, _) in cases["send_once"].items()}
    assert [case for case, outcome in outcomes.items() if outcome == "failed"] == [
        "after_side_effect[call_mail]"
    ], outcomes
    for point in ("clean", "after_tool_call_saved[call_mail]", "after_running[call_mail]"):
        assert outcomes[point] == "passed", (point, outcomes)


@pytest.mark.slow
def test_the_dbos_agent_with_keyed_steps_is_green_at_every_first_crash(pytester: pytest.Pytester) -> None:
    cases = case_outcomes(pytester, TEAM / "adapter_dbos_fixed.yaml", SCENARIOS[1:], "--no-recovery-crashes")
    for stem, call in list(CALLS.items())[1:]:
        outcomes = {case: outcome for case, (outcome, _) in cases[stem].items()}
        assert "failed" not in outcomes.values(), (stem, outcomes)
        # The step's effect made, its row not committed (DBOS runs it again), and committed
        # (replayed from the row): two moments, both reached, both green.
        assert outcomes[f"after_side_effect[{call}]"] == "passed", (stem, outcomes)
        assert outcomes[f"before_tool_result[{call}]"] == "passed", (stem, outcomes)
