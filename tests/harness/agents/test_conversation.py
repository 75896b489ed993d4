"""Answering a foreign agent's prompts: turns in order, approvals by the scenario for the
tool each prompt is about (its tool group, or its text through approvals.prompts), re-asks by
occurrence across lives, and a prompt tied to no tool never answered by a guess."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from crashmatrix.harness.agents.adapter_file import ForeignSpec, load_foreign
from crashmatrix.harness.agents.conversation import ASKED, Conversation, UnansweredApproval
from crashmatrix.harness.errors import YamlError

MEMO = Path(__file__).resolve().parents[3] / "examples" / "memo_agent" / "adapter.yaml"
PROMPT = "memo-agent wants to use {tool} (call_1){again}. Allow? [yes/no] "


def _ctx(
    case_dir: Path,
    approvals: dict[str, str],
    again: dict[str, str] | None = None,
    *,
    life: int = 1,
    tools: tuple[str, ...] = ("send_email", "create_order"),
    events: list[Any] | None = None,
) -> Any:
    """What a Conversation reads of a life: the answers, the scenario's tools, where the case
    keeps what was asked, which life this is, and the trace."""
    return SimpleNamespace(
        approvals=approvals,
        approvals_again=again or {},
        case_dir=case_dir,
        life=life,
        scenario=SimpleNamespace(tools=tools),
        trace=(events if events is not None else []).append,
    )


def _conversation(
    tmp_path: Path, approvals: dict[str, str], again: dict[str, str] | None = None
) -> Conversation:
    return Conversation(load_foreign(MEMO), ["Mail the memo"], _ctx(tmp_path, approvals, again))


def test_an_approval_prompt_naming_the_agents_tool_is_answered_by_the_suites_name(tmp_path: Path) -> None:
    # memo-agent calls send_email "mail" (its catalogue:); the scenario says send_email: no.
    conversation = _conversation(tmp_path, {"send_email": "no", "*": "yes"})
    assert conversation.answer(PROMPT.format(tool="mail", again=""), waiting=False) == "no\n"
    assert conversation.answer(PROMPT.format(tool="order", again=""), waiting=False) == "yes\n"


def test_the_again_table_answers_a_prompt_whose_again_group_matched(tmp_path: Path) -> None:
    conversation = _conversation(tmp_path, {"create_order": "yes"}, {"create_order": "no"})
    assert conversation.answer(PROMPT.format(tool="order", again=""), waiting=False) == "yes\n"
    assert conversation.answer(PROMPT.format(tool="order", again=" once more"), waiting=False) == "no\n"


def test_an_agent_whose_prompt_can_say_again_is_taken_at_its_word(tmp_path: Path) -> None:
    # memo-agent says "once more" when it asks again; after a restart that lost its approval
    # it asks afresh, as the reference agent does, and the scenario's first answer is its.
    answers = ({"create_order": "yes"}, {"create_order": "no"})
    first = Conversation(load_foreign(MEMO), [], _ctx(tmp_path, *answers, life=1))
    assert first.answer(PROMPT.format(tool="order", again=""), waiting=False) == "yes\n"
    later = Conversation(load_foreign(MEMO), [], _ctx(tmp_path, *answers, life=2))
    assert later.answer(PROMPT.format(tool="order", again=""), waiting=False) == "yes\n"
    assert later.answer(PROMPT.format(tool="order", again=" once more"), waiting=False) == "no\n"


def test_a_turn_prompt_gets_the_next_turn_then_end_of_input(tmp_path: Path) -> None:
    conversation = _conversation(tmp_path, {})
    assert conversation.answer("> ", waiting=False) == "Mail the memo\n"
    assert conversation.answer("> ", waiting=False) == ""
    assert conversation.answer("thinking...", waiting=False) is None


# -- a prompt that cannot name its tool ------------------------------------------------------

UNNAMED = "name: tool-blind\ncommand: [agent]\napprovals:\n  prompt: 'Approve \\S+\\? \\[y/n\\] '\n"
# The golden approvals agent's two prompts (tests/golden/approvals/agent.py): the first names
# its tool, the second does not; one regex with two branches matches both.
BRANCHES = (
    "name: two-prompts\ncommand: [agent]\n"
    "catalogue: {run_command: {name: run_bash}, write_file: {name: write}, read_file: {}}\n"
    "approvals:\n"
    "  prompt: '允许(?:执行 (?P<tool>\\w+)\\(.*\\)|写入)？\\[y/N\\] '\n"
)
RUN = "允许执行 run_bash(npm test)？[y/N] "
WRITE = "允许写入？[y/N] "


def _adapter(tmp_path: Path, text: str) -> ForeignSpec:
    path = tmp_path / "adapter.yaml"
    path.write_text(text, encoding="utf-8")
    return load_foreign(path)


def test_a_prompt_tied_to_no_tool_is_answered_when_every_tool_gets_the_same_answer(tmp_path: Path) -> None:
    spec = _adapter(tmp_path, UNNAMED)
    conversation = Conversation(spec, [], _ctx(tmp_path, {"*": "no"}))
    assert conversation.answer("Approve send_email? [y/n] ", waiting=False) == "n\n"
    # One tool in the scenario: its answer is the only one there is.
    one = Conversation(spec, [], _ctx(tmp_path, {"send_email": "no", "*": "yes"}, tools=("send_email",)))
    assert one.answer("Approve send_email? [y/n] ", waiting=False) == "n\n"


def test_a_prompt_tied_to_no_tool_is_never_answered_when_the_answers_differ(tmp_path: Path) -> None:
    events: list[Any] = []
    ctx = _ctx(tmp_path, {"send_email": "no"}, events=events)
    conversation = Conversation(_adapter(tmp_path, UNNAMED), [], ctx)
    with pytest.raises(UnansweredApproval) as caught:
        conversation.answer("Approve send_email? [y/n] ", waiting=False)
    why = (
        "the agent asked 'Approve send_email? [y/n]', which names no tool, and the scenario's "
        "approvals differ by tool (send_email: no, create_order: yes): any answer could be the "
        "one it forbids; tie the prompt to its tool in adapter tool-blind's approvals.prompts "
        "(e.g. prompts: {<tool>: '<text only that prompt has>'}) or with a (?P<tool>...) group in "
        f"approvals.prompt ({tmp_path / 'adapter.yaml'}:4:3)"
    )
    assert str(caught.value) == why
    # The trace says so (the verdict makes the case not applicable with it), and the agent
    # is told nothing: a later read raises again instead of handing out the next turn.
    assert events == [{"event": "approval_unanswered", "prompt": "Approve send_email? [y/n]", "why": why}]
    with pytest.raises(UnansweredApproval):
        conversation.answer("> ", waiting=True)
    assert not (tmp_path / ASKED).exists()  # nothing was answered, so nothing was asked


def test_the_branch_of_a_prompt_that_names_no_tool_is_not_answered_by_the_star(tmp_path: Path) -> None:
    # The agent: its run_bash prompt names the tool, its write prompt does not.
    spec = _adapter(tmp_path, BRANCHES)
    tools = ("write_file", "read_file", "run_command")
    conversation = Conversation(spec, [], _ctx(tmp_path, {"write_file": "no", "*": "yes"}, tools=tools))
    assert conversation.answer(RUN, waiting=False) == "y\n"
    with pytest.raises(UnansweredApproval, match=r"the agent asked '允许写入？\[y/N\]', which names no tool"):
        conversation.answer(WRITE, waiting=False)


def test_approvals_prompts_tie_a_prompt_to_its_tool_by_its_text(tmp_path: Path) -> None:
    # Keyed by the agent's name (write) or the suite's (run_command): both are the suite's tool.
    spec = _adapter(
        tmp_path,
        BRANCHES.replace("(?:执行 (?P<tool>\\w+)\\(.*\\)|写入)", ".*")
        + "  prompts: {write: 允许写入, run_command: '执行 run_bash\\('}\n",
    )
    assert spec.approval_prompts == (("write_file", "允许写入"), ("run_command", "执行 run_bash\\("))
    tools = ("write_file", "read_file", "run_command")
    conversation = Conversation(
        spec, [], _ctx(tmp_path, {"write_file": "no"}, {"run_command": "no"}, tools=tools)
    )
    assert conversation.answer(WRITE, waiting=False) == "n\n"
    assert conversation.answer(RUN, waiting=False) == "y\n"


def test_a_prompt_matching_two_tools_prompts_is_tied_to_neither(tmp_path: Path) -> None:
    spec = _adapter(tmp_path, BRANCHES + "  prompts: {write: 允许, run_bash: 'y/N'}\n")
    ctx = _ctx(tmp_path, {"write_file": "no"}, tools=("write_file", "run_command"))
    with pytest.raises(
        UnansweredApproval, match=r"its text matches approvals\.prompts for write_file and run_command"
    ):
        Conversation(spec, [], ctx).answer(WRITE, waiting=False)


# -- re-asks, by occurrence across lives -----------------------------------------------------


def test_the_same_tool_asked_again_in_a_later_life_gets_the_again_answer(tmp_path: Path) -> None:
    spec = _adapter(tmp_path, BRANCHES)
    answers = ({"run_command": "yes"}, {"run_command": "no"})
    first = Conversation(spec, [], _ctx(tmp_path, *answers, life=1, tools=("run_command",)))
    assert first.answer(RUN, waiting=False) == "y\n"
    # The prompt is the same after the restart: the case directory remembers it was asked.
    second = Conversation(spec, [], _ctx(tmp_path, *answers, life=2, tools=("run_command",)))
    assert second.answer(RUN, waiting=False) == "n\n"
    # A third ask in life 2 is the second of that life: life 1 asked once, so it is a new call.
    assert second.answer(RUN, waiting=False) == "y\n"
    third = Conversation(spec, [], _ctx(tmp_path, *answers, life=3, tools=("run_command",)))
    assert [third.answer(RUN, waiting=False) for _ in range(3)] == ["n\n", "n\n", "y\n"]


def test_a_second_ask_in_the_same_life_is_a_new_call(tmp_path: Path) -> None:
    spec = _adapter(tmp_path, BRANCHES)
    conversation = Conversation(spec, [], _ctx(tmp_path, {}, {"run_command": "no"}, tools=("run_command",)))
    assert [conversation.answer(RUN, waiting=False) for _ in range(2)] == ["y\n", "y\n"]


def test_a_prompt_tied_to_no_tool_is_remembered_by_its_text(tmp_path: Path) -> None:
    spec = _adapter(tmp_path, UNNAMED)
    answers = ({"*": "yes"}, {"*": "no"})
    assert (
        Conversation(spec, [], _ctx(tmp_path, *answers)).answer("Approve a? [y/n] ", waiting=False) == "y\n"
    )
    later = Conversation(spec, [], _ctx(tmp_path, *answers, life=2))
    assert later.answer("Approve b? [y/n] ", waiting=False) == "y\n"  # another prompt: first ask
    assert later.answer("Approve a? [y/n] ", waiting=False) == "n\n"


def test_a_question_line_cut_by_a_kill_is_not_counted(tmp_path: Path) -> None:
    (tmp_path / ASKED).write_text('{"life": 1, "key": "tool:run_command", "ag', encoding="utf-8")
    spec = _adapter(tmp_path, BRANCHES)
    conversation = Conversation(
        spec, [], _ctx(tmp_path, {}, {"run_command": "no"}, life=2, tools=("run_command",))
    )
    assert conversation.answer(RUN, waiting=False) == "y\n"


# -- approvals.prompts in the adapter file ---------------------------------------------------


@pytest.mark.parametrize(
    ("prompts", "message"),
    [
        (
            "{mail: x}",
            "6:13: approvals.prompts.mail: the agent has no tool 'mail'; name one of its tools: "
            "read_file, run_command (run_bash), write_file (write)",
        ),
        (
            "{write: a, write_file: b}",
            "6:23: approvals.prompts.write_file: write_file has a prompt already (as write); "
            "give each tool one",
        ),
        ("{write: '('}", "6:13: approvals.prompts.write: not a regular expression (missing ), unterminated"),
    ],
)
def test_a_bad_prompts_entry_is_one_line(tmp_path: Path, prompts: str, message: str) -> None:
    with pytest.raises(YamlError) as caught:
        _adapter(tmp_path, BRANCHES + f"  prompts: {prompts}\n")
    assert str(caught.value).startswith(f"{tmp_path / 'adapter.yaml'}:{message}")
    assert "\n" not in str(caught.value)


# -- stdin as a whole text stream -------------------------------------------------------------


def _console(tmp_path: Path, turns: list[str]) -> Any:
    from crashmatrix.harness.agents.conversation import _Console
    from crashmatrix.harness.lives.capped_log import CappedLog

    conversation = Conversation(load_foreign(MEMO), turns, _ctx(tmp_path, {}))
    log = CappedLog(tmp_path / "agent.log")
    return _Console(conversation, log)


def test_an_agent_that_reads_its_whole_stdin_gets_every_turn_left_then_end_of_input(tmp_path: Path) -> None:
    console = _console(tmp_path, ["Mail the memo", "Order two chairs"])
    console.write("> ")
    assert console.read() == "Mail the memo\nOrder two chairs\n"
    assert console.read() == ""


def test_an_agent_that_iterates_over_stdin_gets_one_turn_per_line(tmp_path: Path) -> None:
    console = _console(tmp_path, ["Mail the memo", "Order two chairs"])
    assert list(console) == ["Mail the memo\n", "Order two chairs\n"]
