"""A torn tail, a model that never stops, and a turn started on top of an unfinished one."""

from __future__ import annotations

import json

import httpx
import pytest

from crashmatrix.harness.core.ledger import arguments_sha256
from crashmatrix.harness.core.script import Reply, chat_completion
from crashmatrix.harness.session_file import read_session
from crashmatrix.mock_tools.file_tools import plan_write
from crashmatrix.reference_agent.agent import AgentError

from .rig import Rig, agent_key, answer_any_tool_result, assistant_call, ledger, tool_result, user

WRITE = {"path": "notes.txt", "content": "new content"}


def test_torn_tail_is_set_aside_as_a_torn_file_and_recovery_proceeds(rig: Rig) -> None:
    key, sha = agent_key("call_w", "write_file", WRITE), arguments_sha256(WRITE)
    plan = plan_write(rig.world, WRITE["path"], WRITE["content"])
    complete = [
        user("write notes"),
        assistant_call("call_w", "write_file", WRITE),
        ledger("exec_old", "call_w", "approved", "write_file", key, sha),
        ledger("exec_old", "call_w", "running", "write_file", key, sha, plan=plan),
    ]
    # The writer died half-way through appending the terminal line.
    fragment = b'{"type":"tool_execution","execution_id":"exec_old","tool_call_id":"call_w","status":"succ'
    rig.write_session(complete, tail=fragment)
    intact = rig.session.read_bytes()[: -len(fragment)]
    offset = len(intact)
    agent, _ = rig.agent(answer_any_tool_result("recovered"))

    assert agent.resume() == "recovered"

    torn = rig.session.with_name(f"{rig.session.name}.torn-{offset}")
    assert torn.read_bytes() == fragment
    data = rig.session.read_bytes()
    assert data.startswith(intact), "the complete lines before the tear are kept byte for byte"
    log = read_session(rig.session)
    assert log.torn_tail is None
    assert [r.get("status") for r in rig.records()[2:7]] == [
        "approved",
        "running",
        "unknown",
        "approved",
        "running",
    ]
    published = rig.tool_results()["call_w"]
    assert published["ok"] is True and published["recovery"] == "reapplied"
    assert (rig.world.workspace / "notes.txt").read_text() == "new content"


def test_a_model_that_always_calls_a_tool_stops_after_max_rounds(rig: Rig) -> None:
    (rig.world.workspace / "notes.txt").write_text("hi")
    agent, _ = rig.agent([], max_rounds=3)
    served: list[int] = []

    def endless(request: httpx.Request) -> httpx.Response:
        served.append(1)
        call = (f"call_{len(served)}", "read_file", {"path": "notes.txt"})
        return httpx.Response(
            200, json=chat_completion(Reply(tool_calls=(call,)), model="m", serial=len(served))
        )

    rig.model_route.mock(side_effect=endless)

    with pytest.raises(AgentError, match="max_rounds"):
        agent.run_turn("read forever")

    assert rig.model_route.call_count == 3
    roles = [r["message"]["role"] for r in rig.records()]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool"]


def test_run_turn_refuses_to_start_while_a_tool_call_is_pending(rig: Rig) -> None:
    rig.write_session([user("write notes"), assistant_call("call_w", "write_file", WRITE)])
    before = rig.session.read_bytes()
    agent, _ = rig.agent(answer_any_tool_result())

    with pytest.raises(AgentError, match="resume"):
        agent.run_turn("something else")

    assert rig.session.read_bytes() == before, "no user message may be appended"
    assert rig.model_route.call_count == 0
    assert rig.world.events() == []


def test_run_turn_refuses_to_start_while_a_published_result_awaits_the_model(rig: Rig) -> None:
    rig.write_session(
        [
            user("write notes"),
            assistant_call("call_w", "write_file", WRITE),
            tool_result("call_w", {"ok": True, "status": "succeeded"}),
        ]
    )
    before = rig.session.read_bytes()
    agent, _ = rig.agent(answer_any_tool_result("finished"))

    with pytest.raises(AgentError):
        agent.run_turn("something else")
    assert rig.session.read_bytes() == before

    # resume() finishes the old turn; then a new turn may start.
    assert agent.resume() == "finished"
    assert json.loads(rig.session.read_bytes().splitlines()[-1])["message"]["content"] == "finished"
