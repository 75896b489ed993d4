"""Answering a foreign agent's prompts: turns in order, approvals by the scenario."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from crashmatrix.harness.agents.adapter_file import load_foreign
from crashmatrix.harness.agents.conversation import Conversation

MEMO = Path(__file__).resolve().parents[3] / "examples" / "memo_agent" / "adapter.yaml"
PROMPT = "memo-agent wants to use {tool} (call_1){again}. Allow? [yes/no] "


def _conversation(approvals: dict[str, str], again: dict[str, str] | None = None) -> Conversation:
    ctx: Any = SimpleNamespace(approvals=approvals, approvals_again=again or {})
    return Conversation(load_foreign(MEMO), ["Mail the memo"], ctx)


def test_an_approval_prompt_naming_the_agents_tool_is_answered_by_the_suites_name() -> None:
    # memo-agent calls send_email "mail" (its catalogue:); the scenario says send_email: no.
    conversation = _conversation({"send_email": "no", "*": "yes"})
    assert conversation.answer(PROMPT.format(tool="mail", again=""), waiting=False) == "no\n"
    assert conversation.answer(PROMPT.format(tool="order", again=""), waiting=False) == "yes\n"


def test_the_again_table_answers_a_second_prompt_for_the_same_call() -> None:
    conversation = _conversation({"create_order": "yes"}, {"create_order": "no"})
    assert conversation.answer(PROMPT.format(tool="order", again=""), waiting=False) == "yes\n"
    assert conversation.answer(PROMPT.format(tool="order", again=" once more"), waiting=False) == "no\n"


def test_a_turn_prompt_gets_the_next_turn_then_end_of_input() -> None:
    conversation = _conversation({})
    assert conversation.answer("> ", waiting=False) == "Mail the memo\n"
    assert conversation.answer("> ", waiting=False) == ""
    assert conversation.answer("thinking...", waiting=False) is None
