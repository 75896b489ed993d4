"""Answering a foreign agent's prompts: turns in order, approvals by the scenario."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from crashmatrix.harness.agents.adapter_file import ForeignSpec, load_foreign
from crashmatrix.harness.agents.conversation import Conversation, check_approvals
from crashmatrix.harness.agents.foreign import ForeignAdapter
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.errors import InputError
from crashmatrix.harness.input.scenario import load_scenario

from ...scenario_data import email_once

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


# -- a prompt that cannot name its tool ------------------------------------------------------

UNNAMED = "name: tool-blind\ncommand: [agent]\napprovals:\n  prompt: 'Approve \\S+\\? \\[y/n\\] '\n"


def _tool_blind(tmp_path: Path) -> ForeignSpec:
    path = tmp_path / "adapter.yaml"
    path.write_text(UNNAMED, encoding="utf-8")
    return load_foreign(path)


def _scenario(tmp_path: Path, **keys: object) -> Scenario:
    path = tmp_path / "email.yaml"
    path.write_text(email_once(**keys), encoding="utf-8")
    return load_scenario(path)


def test_a_prompt_without_a_tool_group_loads_and_is_answered_by_the_star(tmp_path: Path) -> None:
    ctx: Any = SimpleNamespace(approvals={"*": "no"}, approvals_again={})
    conversation = Conversation(_tool_blind(tmp_path), [], ctx)
    assert conversation.answer("Approve send_email? [y/n] ", waiting=False) == "n\n"


def test_a_scenario_approving_one_tool_is_refused_when_the_prompt_cannot_name_it(tmp_path: Path) -> None:
    # email_once is 10 lines: the appended approvals: is line 11, its send_email key line 12.
    scenario = _scenario(tmp_path, approvals={"send_email": "no", "*": "yes"})
    with pytest.raises(InputError) as caught:
        check_approvals(_tool_blind(tmp_path), scenario)
    assert str(caught.value) == (
        f"{scenario.path}:12:3: approvals.send_email: adapter tool-blind's approvals.prompt "
        f"({tmp_path / 'adapter.yaml'}:4:3) has no (?P<tool>...) group, so every prompt would be "
        "answered by '*'; add (?P<tool>\\w+) where the prompt names the tool, or approve by '*' alone"
    )


def test_a_second_approval_naming_a_tool_is_refused_too(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, approvals={"*": "yes"}, approvals_again={"send_email": "no"})
    with pytest.raises(InputError, match=r":14:3: approvals_again\.send_email: adapter tool-blind's"):
        check_approvals(_tool_blind(tmp_path), scenario)


def test_approvals_by_the_star_alone_need_no_tool_group(tmp_path: Path) -> None:
    check_approvals(_tool_blind(tmp_path), _scenario(tmp_path, approvals={"*": "no"}))


def test_a_prompt_naming_its_tool_takes_approvals_tool_by_tool(tmp_path: Path) -> None:
    check_approvals(load_foreign(MEMO), _scenario(tmp_path, approvals={"send_email": "no"}))


def test_the_life_of_a_tool_blind_adapter_fails_before_its_agent_starts(tmp_path: Path) -> None:
    # A life's exception is its error (life_main), and the case's verdict is 'error' with it.
    # The check comes first: nothing else of the context is touched.
    adapter = ForeignAdapter(_tool_blind(tmp_path))
    ctx: Any = SimpleNamespace(scenario=_scenario(tmp_path, approvals={"send_email": "no"}))
    with pytest.raises(InputError, match=r"approvals\.send_email: adapter tool-blind's approvals\.prompt"):
        adapter.run_life(ctx)
