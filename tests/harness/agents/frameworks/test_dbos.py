"""DBOS's step table read in crashmatrix's vocabulary (``framework: dbos``): a model step's
output is the assistant's reply, a tool step's output the Tool Result of the call it answers
(succeeded), its error a failed call; a step started and never committed has no row, so it
reads as a call with no result; a helper step the loop runs is no call. Fast, pure, except the
last test, which reads a system database a real DBOS process wrote."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.agents.frameworks import dbos as d
from crashmatrix.harness.errors import InputError


def _reply(*calls: tuple[str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None if calls else "Done.",
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
            for call_id, name in calls
        ],
    }


USER = ({"role": "user", "content": "Email alice"},)


def _messages(turn: d.Turn) -> list[dict[str, Any]]:
    return [dict(record["message"]) for record in d.chat_records([turn])]


def test_a_tool_steps_output_is_its_calls_result_and_an_error_a_failed_call() -> None:
    turn = d.Turn(
        1,
        "SUCCESS",
        USER,
        (
            d.Step(1, "ask_model", _reply(("call_a", "send_email"), ("call_b", "create_order"))),
            d.Step(2, "send_email", "Email sent to alice."),
            d.Step(3, "create_order", error=f"{d.STEP_ERROR}: ValueError: no stock"),
            d.Step(4, "ask_model", _reply()),
        ),
    )
    messages = _messages(turn)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_a", "call_b"]
    assert messages[2] == {"role": "tool", "tool_call_id": "call_a", "content": "Email sent to alice."}
    assert messages[3]["tool_call_id"] == "call_b"
    assert messages[3]["content"].startswith(d.STEP_ERROR)
    assert messages[4] == {"role": "assistant", "content": "Done."}


def test_a_step_started_and_never_committed_has_no_row_so_its_call_has_no_result() -> None:
    turn = d.Turn(1, "PENDING", USER, (d.Step(1, "ask_model", _reply(("call_a", "send_email"))),))
    messages = _messages(turn)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    # The step that starts next is that call's: its boundaries carry its id.
    assert d.running_call(turn.steps, "send_email") == "call_a"


def test_a_helper_step_between_the_reply_and_the_tools_is_no_call() -> None:
    steps = (
        d.Step(1, "greeting", "You are a mailer."),
        d.Step(2, "ask_model", _reply(("call_a", "send_email"), ("call_b", "send_email"))),
        d.Step(3, "audit", "audited send_email"),
    )
    assert d.running_call(steps, "audit") is None
    assert d.running_call(steps, "send_email") == "call_a"
    done = (*steps, d.Step(4, "send_email", "sent"), d.Step(5, "audit", "audited"))
    assert d.running_call(done, "send_email") == "call_b"
    messages = _messages(d.Turn(1, "PENDING", USER, done))
    assert [m.get("tool_call_id") for m in messages if m["role"] == "tool"] == ["call_a"]


def test_each_turn_is_its_workflow_its_user_message_the_last_of_its_input() -> None:
    first = d.Turn(1, "SUCCESS", USER, (d.Step(1, "ask_model", _reply()),))
    second_input = (*USER, {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Again"})
    second = d.Turn(2, "SUCCESS", second_input, (d.Step(1, "ask_model", _reply()),))
    records = d.chat_records([second, first])
    assert [r["message"]["content"] for r in records] == ["Email alice", "Done.", "Again", "Done."]


APP = """
import json, os, sys
from dbos import DBOS, SetWorkflowID

@DBOS.step()
def ask_model(messages):
    if any(m["role"] == "tool" for m in messages):
        return {"role": "assistant", "content": "Sent."}
    call = {"id": "call_a", "type": "function", "function": {"name": "send_email", "arguments": "{}"}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}

@DBOS.step()
def send_email():
    if os.environ.get("FAIL"):
        raise RuntimeError("mail server down")
    return "Email sent."

@DBOS.workflow()
def turn(messages):
    messages = list(messages)
    while True:
        reply = ask_model(messages)
        messages.append(reply)
        if not reply.get("tool_calls"):
            return reply["content"]
        try:
            result = send_email()
        except Exception as error:
            result = f"Error: {error}"
        messages.append({"role": "tool", "tool_call_id": "call_a", "content": result})

DBOS(config={"name": "reader-test", "system_database_url": sys.argv[1]})
DBOS.launch()
with SetWorkflowID("turn-1"):
    turn([{"role": "user", "content": "Email alice"}])
DBOS.destroy()
"""


@pytest.mark.slow
@pytest.mark.parametrize("fail", [False, True], ids=["output", "error"])
def test_the_step_table_a_real_dbos_wrote_reads_as_the_conversation(tmp_path: Path, fail: bool) -> None:
    pytest.importorskip("dbos")
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(APP), encoding="utf-8")
    env = {"FAIL": "1"} if fail else {}
    subprocess.run(
        [sys.executable, str(script), f"sqlite:///{tmp_path / d.DB_NAME}"],
        cwd=tmp_path,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
        timeout=120,
    )
    messages = [dict(r["message"]) for r in d.read_records(tmp_path)]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["id"] == "call_a"
    told = messages[2]["content"]
    if fail:
        assert told == f"{d.STEP_ERROR}: RuntimeError: mail server down"
    else:
        assert told == "Email sent."
    [turn] = d.read_turns(tmp_path / d.DB_NAME)
    assert (turn.number, turn.status) == (1, "SUCCESS")


def test_without_dbos_installed_the_adapter_says_how_to_install_it_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.metadata
    import types

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(InputError) as caught:
        d.check(types.SimpleNamespace(path=Path("team/adapter.yaml")))
    expected = "team/adapter.yaml: the dbos adapter needs DBOS: pip install 'crashmatrix[dbos]'"
    assert str(caught.value) == expected
