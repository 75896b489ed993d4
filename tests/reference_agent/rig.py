"""The in-process rig for the reference agent: world, respx-mocked HTTP, scripted model, agent.

Nothing forks here. Every HTTP request goes through one ``httpx.Client`` under
``respx.mock(assert_all_mocked=True)``: the model route answers with a ``ScriptedModel`` and the
order host with ``mock_tools.order_api``; any other host raises instead of leaving the machine.
``assert_all_called=False`` because most tests never touch the order API.

A "crash" in-process is an exception raised from the agent's boundary hook: the agent stops
exactly where SIGKILL would have stopped it (every line before it is already fsynced), and a
new ``Agent`` on the same session file is the next life.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import respx

from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.ledger import arguments_sha256, idempotency_key
from crashmatrix.harness.core.records import ToolCall
from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.mock_tools import MockToolbox, World, catalogue
from crashmatrix.mock_tools.model import ScriptedModel
from crashmatrix.reference_agent.agent import Agent
from crashmatrix.reference_agent.approval import ScriptedApprover
from crashmatrix.reference_agent.model import ModelSettings, OpenAIChatModel, make_openai_client

MODEL_BASE_URL = "http://model.test/v1"
MODEL_URL = f"{MODEL_BASE_URL}/chat/completions"
SESSION_ID = "demo"

# Seed 000, section 7.2: the crash scene's identities, byte for byte.
SEED_CALL_ID = "call_recovery_demo"
SEED_ARGUMENTS_JSON = '{"path":"recovery-demo.txt","content":"recovered"}'
SEED_SHA = "8889280b9146b06f667dd62a1bdb2f6bcb763b656a18214926a39dba97dc18fe"
SEED_KEY = f"write_file:{SEED_SHA}"
SEED_EXEC = "exec_interrupted_demo"

JSON = dict[str, Any]


class SimulatedCrash(BaseException):
    """Raised from the boundary hook: the in-process stand-in for SIGKILL.

    A BaseException so that no ``except Exception`` in the agent can swallow it.
    """


def crash_at(boundary: str, tool_call_id: str | None = None) -> Callable[[str, str], None]:
    def hook(reached: str, call_id: str) -> None:
        if reached == boundary and (tool_call_id is None or call_id == tool_call_id):
            raise SimulatedCrash(f"{boundary}[{call_id}]")

    return hook


# -- record builders (seed 000's on-disk shapes) ---------------------------------------------


def user(text: str) -> JSON:
    return {"type": "message", "message": {"role": "user", "content": text}}


def assistant_call(call_id: str, name: str, arguments: Mapping[str, Any] | str) -> JSON:
    raw = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}
    return {"type": "message", "message": {"role": "assistant", "content": "", "tool_calls": [call]}}


def tool_result(call_id: str, content: Mapping[str, Any]) -> JSON:
    return {
        "type": "message",
        "message": {"role": "tool", "tool_call_id": call_id, "content": json.dumps(dict(content))},
    }


def ledger(
    execution_id: str,
    call_id: str,
    status: str,
    name: str,
    key: str,
    sha: str,
    *,
    result: Mapping[str, Any] | None = None,
    **extra: Any,
) -> JSON:
    line: JSON = {
        "type": "tool_execution",
        "execution_id": execution_id,
        "tool_call_id": call_id,
        "status": status,
    }
    if result is not None:
        line["result"] = dict(result)
    line |= {"tool_name": name, "idempotency_key": key, "arguments_sha256": sha, **extra}
    return line


def agent_key(call_id: str, name: str, arguments: Mapping[str, Any], *, turn: int = 1) -> str:
    """The key the reference agent derives for a call (harness.ledger.idempotency_key)."""
    call = ToolCall(call_id, name, json.dumps(dict(arguments)))
    return idempotency_key(
        session_id=SESSION_ID, turn=turn, tool_call=call, args_sha256=arguments_sha256(arguments)
    )


def ask_then_answer(
    call_id: str, name: str, arguments: Mapping[str, Any], answer: str = "done"
) -> list[Rule]:
    """A model that makes one tool call on the user's message and answers after any result."""
    return [
        Rule(When(role="user"), Reply(tool_calls=((call_id, name, dict(arguments)),))),
        Rule(When(role="tool"), Reply(answer)),
    ]


def answer_any_tool_result(answer: str = "done") -> list[Rule]:
    return [Rule(When(role="tool"), Reply(answer))]


# -- the rig -----------------------------------------------------------------------------------


@dataclass
class Rig:
    root: Path
    world: World
    session: Path
    http: httpx.Client
    router: respx.MockRouter
    model_route: respx.Route
    contracts: dict[str, ToolContract] = field(default_factory=catalogue)
    agents: list[Agent] = field(default_factory=list)

    def write_session(self, records: Sequence[Mapping[str, Any]], *, tail: bytes = b"") -> None:
        """A hand-built session, written in seed 000's compact JSONL."""
        text = "".join(json.dumps(dict(r), ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
        self.session.parent.mkdir(parents=True, exist_ok=True)
        self.session.write_bytes(text.encode("utf-8") + tail)

    def records(self) -> list[JSON]:
        return [json.loads(line) for line in self.session.read_text(encoding="utf-8").splitlines()]

    def agent(
        self,
        rules: Sequence[Rule] | ScriptedModel,
        *,
        approver: ScriptedApprover | None = None,
        contracts: Mapping[str, ToolContract] | None = None,
        **options: Any,
    ) -> tuple[Agent, ScriptedModel]:
        model = rules if isinstance(rules, ScriptedModel) else ScriptedModel(list(rules))
        self.model_route.mock(side_effect=model.handle)
        chosen = dict(contracts if contracts is not None else self.contracts)
        # A new agent here is a restart: the one before it "died" (a SimulatedCrash leaves
        # it open), and a dead process's flock is gone, so its session lease is too.
        for previous in self.agents:
            if previous.lease is not None:
                previous.lease.release()
        client = make_openai_client(
            ModelSettings(MODEL_BASE_URL, "test-key", "scripted", max_retries=0), self.http
        )
        agent = Agent(
            session_path=self.session,
            session_id=SESSION_ID,
            model=OpenAIChatModel(client, "scripted"),
            toolbox=MockToolbox(self.world, chosen, self.http),
            contracts=chosen,
            approver=approver if approver is not None else ScriptedApprover(),
            **options,
        )
        self.agents.append(agent)
        return agent, model

    def tool_results(self) -> dict[str, JSON]:
        """Published Tool Result contents by tool_call_id."""
        out: dict[str, JSON] = {}
        for record in self.records():
            message = record.get("message") or {}
            if record["type"] == "message" and message.get("role") == "tool":
                out[message["tool_call_id"]] = json.loads(message["content"])
        return out
