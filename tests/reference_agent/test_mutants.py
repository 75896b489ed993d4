"""Each mutant is one real bug, in one small subclass, reachable as an adapter; and the bug
does what its docstring says, shown in-process on the rig (no fork)."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import pytest

from crashmatrix.harness.agents.reference import ReferenceAdapter
from crashmatrix.harness.core.ledger import arguments_sha256
from crashmatrix.harness.core.records import Message, MessageEntry, ToolCall
from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.mock_tools import MockToolbox
from crashmatrix.mock_tools.model import ScriptedModel
from crashmatrix.reference_agent import mutants
from crashmatrix.reference_agent.agent import Agent
from crashmatrix.reference_agent.approval import ScriptedApprover
from crashmatrix.reference_agent.model import ModelSettings, OpenAIChatModel, make_openai_client
from crashmatrix.reference_agent.mutants import MUTANTS, Mutant

from .rig import MODEL_BASE_URL, SESSION_ID, Rig, agent_key, assistant_call, ledger, tool_result, user

EMAIL = {"to": "ada@example.com", "subject": "Hi", "body": "Hello again."}


def _agent(rig: Rig, cls: type[Agent], rules: list[Rule]) -> Agent:
    rig.model_route.mock(side_effect=ScriptedModel(rules).handle)
    client = make_openai_client(ModelSettings(MODEL_BASE_URL, "k", "scripted", max_retries=0), rig.http)

    agent = cls(
        session_path=rig.session,
        session_id=SESSION_ID,
        model=OpenAIChatModel(client, "scripted"),
        toolbox=MockToolbox(rig.world, rig.contracts, rig.http),
        contracts=rig.contracts,
        approver=ScriptedApprover(),
    )
    rig.agents.append(agent)
    return agent


def test_every_mutant_is_a_documented_subclass() -> None:
    # How many there are is stated in README.md and checked by tests/test_docs.py.
    assert MUTANTS
    for name, cls in MUTANTS.items():
        assert issubclass(cls, Mutant) and cls is not Mutant, name
        assert (cls.__doc__ or "").strip(), f"{name} needs a docstring naming its bug"


def test_every_mutant_is_loadable_as_an_adapter_under_its_name() -> None:
    for name, cls in MUTANTS.items():
        adapter_class = getattr(mutants, name)
        assert issubclass(adapter_class, ReferenceAdapter)
        assert adapter_class.agent_class is cls and adapter_class.name == name


def test_each_mutant_overrides_at_most_two_steps_of_the_agent() -> None:
    # One bug each: a mutant that rewrites half the agent would prove nothing precise.
    for name, cls in MUTANTS.items():
        own = {k for k, v in vars(cls).items() if inspect.isfunction(v)}
        assert own and len(own - {"__init__"}) <= 2, (name, own)


def _reused_call_id_session(rig: Rig) -> None:
    """Turn 1 sent the email under call_0; turn 2's model reused call_0 for the same email,
    and the agent died right after saving that tool call."""
    key = agent_key("call_0", "send_email", EMAIL)
    sha = arguments_sha256(EMAIL)
    done = {"ok": True, "status": "succeeded", "execution_id": "exec_old", "data": {"turn": 1}}
    rig.write_session(
        [
            user("Email Ada"),
            assistant_call("call_0", "send_email", EMAIL),
            ledger("exec_old", "call_0", "approved", "send_email", key, sha),
            ledger("exec_old", "call_0", "running", "send_email", key, sha),
            ledger("exec_old", "call_0", "succeeded", "send_email", key, sha, result=done),
            tool_result("call_0", done),
            {"type": "message", "message": {"role": "assistant", "content": "Sent."}},
            user("Email Ada again, the same text"),
            assistant_call("call_0", "send_email", EMAIL),
        ]
    )


def test_reference_agent_runs_a_reused_call_id_of_a_later_turn_as_a_new_action(rig: Rig) -> None:
    _reused_call_id_session(rig)
    _agent(rig, Agent, [Rule(When(role="tool"), Reply("done"))]).resume()
    assert rig.tool_results()["call_0"]["execution_id"] != "exec_old"
    assert rig.world.snapshot().counts["emails"] == 1  # turn 2's email (turn 1's happened in no world here)


def test_reused_call_id_mutant_replays_the_older_turns_result_instead(rig: Rig) -> None:
    _reused_call_id_session(rig)
    _agent(rig, MUTANTS["reused_call_id_replays_old_turn"], [Rule(When(role="tool"), Reply("done"))]).resume()
    assert rig.tool_results()["call_0"]["execution_id"] == "exec_old"
    assert rig.world.snapshot().counts["emails"] == 0


def test_key_without_arguments_gives_two_different_orders_one_key(rig: Rig) -> None:
    agent = _agent(rig, MUTANTS["key_without_arguments"], [])
    desks = ToolCall("call_a", "create_order", json.dumps({"item": "desk", "quantity": 2}))
    chairs = ToolCall("call_b", "create_order", json.dumps({"item": "chair", "quantity": 3}))
    assert agent.call_state(desks, 1).idempotency_key == agent.call_state(chairs, 2).idempotency_key


def test_no_fsync_mutant_appends_without_syncing(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = _agent(rig, MUTANTS["no_fsync"], [])
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    agent.append(MessageEntry(Message(role="user", content="hello")))
    assert synced == []
    assert b"hello" in Path(rig.session).read_bytes()
