"""What PydanticAI's ``DBOSAgent`` checkpoints, shown with a real SIGKILL (docs/frameworks.md,
"PydanticAI's DBOSAgent"). No crashmatrix: run it twice in an empty folder,

    python pydantic_ai_dbos_agent.py kill     # the run is SIGKILLed inside create_order, after both effects
    python pydantic_ai_dbos_agent.py resume   # DBOS.launch() recovers the run, waits for it

and read ``effects.txt``. The model (a scripted ``FunctionModel``) asks for ``send_email`` and
``create_order`` in one reply; the two calls run concurrently, in threads, in either order
(``DBOSAgent``'s default ``parallel_ordered_events``), and the kill waits for both effects.
``DBOSAgent`` makes the run a DBOS workflow and each model request a step, so the recovered
run replays the reply from its row (``model_calls.txt``: 2 requests in all, not 3); the function
tools are not steps, they run inline in the workflow, so both run again -- ``send_email``, which
had finished before the crash, included: 2 emails, 2 orders. A tool the team makes a
``@DBOS.step`` itself would be re-run only when killed before its row committed
(examples/dbos_team/support_agent.py).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

EFFECTS = "effects.txt"


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as file:
        file.write(line + "\n")
        file.flush()
        os.fsync(file.fileno())


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    _append("model_calls.txt", "request")
    answered = any(getattr(part, "part_kind", "") == "tool-return" for m in messages for part in m.parts)
    if answered:
        return ModelResponse(parts=[TextPart("Done.")])
    return ModelResponse(
        parts=[
            ToolCallPart("send_email", {"to": "alice@example.com"}, tool_call_id="call_mail"),
            ToolCallPart("create_order", {"item": "desk"}, tool_call_id="call_order"),
        ]
    )


agent: Agent[None, str] = Agent(FunctionModel(model), name="support")
# Set once send_email's effect is on disk. The two tools run concurrently, so create_order may
# run first: the kill waits for the email, else it could land before the email ever ran.
_emailed = threading.Event()


@agent.tool_plain
def send_email(to: str) -> str:
    _append(EFFECTS, f"email {to}")
    _emailed.set()
    return f"Email sent to {to}."


@agent.tool_plain
def create_order(item: str) -> str:
    _append(EFFECTS, f"order {item}")
    if sys.argv[1:] == ["kill"]:
        _emailed.wait(timeout=60)  # bounded: a run that never emails still dies
        os.kill(os.getpid(), signal.SIGKILL)  # after the effect, before anything returns
    return f"Order placed: {item}."


durable = DBOSAgent(agent)


def main() -> Any:
    DBOS(config={"name": "support-dbos-agent", "system_database_url": "sqlite:///dbos.sqlite"})
    DBOS.launch()  # recovers the run a killed process left pending
    try:
        if sys.argv[1:] == ["resume"]:
            return DBOS.retrieve_workflow("turn-1").get_result(polling_interval_sec=0.05).output
        with SetWorkflowID("turn-1"):
            return durable.run_sync("Email alice and order a desk").output
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    print(main())
