"""harness.plan.applicability: why a scenario cannot apply to an agent, one reason each."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.core.capabilities import NATIVE_CAPABILITIES, Capabilities
from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.harness.core.toolmap import ToolMap, ToolName
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.plan.applicability import not_applicable

from ...scenario_data import email_once

TOOLS = ("send_email", "read_file")
# Nothing but what not_applicable reads matters here; the rest is a minimal valid scenario.
BASE = Scenario(
    path=Path("mail.yaml"),
    name="mail",
    tools=TOOLS,
    contracts={tool: ToolContract(name=tool) for tool in TOOLS},
    turns=("Send it",),
    rules=(Rule(When(role="user"), Reply(content="Done.")),),
    approvals={"*": "yes"},
)

TIMEOUT = {"tool": "send_email", "kind": "timeout_before"}
TAMPER = {"tamper_arguments": {"call": "call_1", "arguments": {"to": "b@example.com"}}}
FAULT_REASON = (
    "fault timeout_before on send_email needs the harness to run send_email for this agent "
    "(tools: harness, services:, or intercept:)"
)
SQLITE_SESSION = (
    "its session is a SQLite database (state.db): the harness edits a saved tool call's arguments "
    "only in a JSONL session file"
)
TAMPER_REASON = f"tamper_arguments cannot edit this agent's saved tool call: {SQLITE_SESSION}"
APPROVAL_REASON = "the scenario answers an approval with no, and this agent asks for none"

# A foreign agent at its most limited: its own tool names, nothing served by the harness, no
# approval prompt, its own session (what ForeignAdapter gives a command: agent).
BARE = Capabilities(
    tools=ToolMap({"send_email": ToolName("send_mail"), "read_file": ToolName("cat")}),
    served=frozenset(),
    approvals=False,
    edits_native_session=False,
    own_session_tamper=SQLITE_SESSION,
)


def _scenario(**changes: Any) -> Scenario:
    return dataclasses.replace(BASE, **changes)


# --- nothing in the way ---------------------------------------------------------------------


def test_the_native_agent_can_run_every_scenario() -> None:
    everything = _scenario(
        faults=(TIMEOUT,),
        between_lives=(TAMPER,),
        approvals={"send_email": "no"},
        approvals_again={"send_email": "no"},
    )
    assert not_applicable(everything, NATIVE_CAPABILITIES) == ()


def test_a_plain_scenario_applies_even_to_the_most_limited_agent_with_its_tools() -> None:
    assert not_applicable(BASE, BARE) == ()


# --- tools ----------------------------------------------------------------------------------


def test_a_scenario_needing_a_tool_the_agent_lacks_names_that_tool() -> None:
    mail_only = Capabilities(tools=ToolMap({"send_email": ToolName("send_mail")}))
    assert not_applicable(BASE, mail_only) == ("the agent has no read_file",)


def test_every_missing_tool_is_a_reason_in_the_scenarios_order() -> None:
    assert not_applicable(BASE, Capabilities(tools=ToolMap({}))) == (
        "the agent has no send_email",
        "the agent has no read_file",
    )


def test_a_tool_the_agent_has_under_another_name_is_not_missing() -> None:
    renamed = Capabilities(tools=ToolMap({"send_email": ToolName("send_mail"), "read_file": ToolName("cat")}))
    assert not_applicable(BASE, renamed) == ()


# --- faults ---------------------------------------------------------------------------------


def test_a_fault_on_a_tool_the_harness_does_not_run_for_the_agent_is_a_reason() -> None:
    unserved = Capabilities(served=frozenset({"read_file"}))
    assert not_applicable(_scenario(faults=(TIMEOUT,)), unserved) == (FAULT_REASON,)


def test_a_fault_on_a_tool_the_harness_serves_is_no_reason() -> None:
    # e.g. an adapter with services: [mail], which serves send_email.
    served = Capabilities(served=frozenset({"send_email"}))
    assert not_applicable(_scenario(faults=(TIMEOUT,)), served) == ()


def test_a_fault_when_the_harness_serves_every_tool_is_no_reason() -> None:
    every = Capabilities(served=None, approvals=False, edits_native_session=False)
    assert not_applicable(_scenario(faults=(TIMEOUT,)), every) == ()


def test_a_fault_on_a_tool_the_agent_lacks_gives_only_the_missing_tool() -> None:
    # The missing tool already says why; a second reason about serving it would be noise.
    no_mail = Capabilities(tools=ToolMap({"read_file": ToolName("read_file")}), served=frozenset())
    assert not_applicable(_scenario(faults=(TIMEOUT,)), no_mail) == ("the agent has no send_email",)


def test_each_unserved_fault_is_a_reason_and_a_repeated_one_is_given_once() -> None:
    faults = (
        TIMEOUT,
        {"tool": "read_file", "kind": "response_lost"},
        {**TIMEOUT, "call": "call_2"},  # the same kind on the same tool: the same reason
    )
    assert not_applicable(_scenario(faults=faults), Capabilities(served=frozenset())) == (
        FAULT_REASON,
        "fault response_lost on read_file needs the harness to run read_file for this agent "
        "(tools: harness, services:, or intercept:)",
    )


# --- between lives --------------------------------------------------------------------------


def test_tamper_arguments_does_not_apply_where_the_agent_keeps_its_session_out_of_reach() -> None:
    own_session = Capabilities(edits_native_session=False, own_session_tamper=SQLITE_SESSION)
    assert not_applicable(_scenario(between_lives=(TAMPER,)), own_session) == (TAMPER_REASON,)


def test_tamper_arguments_applies_to_an_agent_keeping_its_own_jsonl_session() -> None:
    # Its adapter maps the lines: the tamper edits the saved call in the agent's own file.
    own_jsonl = Capabilities(edits_native_session=False, own_session_tamper="")
    assert not_applicable(_scenario(between_lives=(TAMPER,)), own_jsonl) == ()


def test_an_agent_keeping_its_own_session_is_out_of_reach_unless_its_adapter_says_otherwise() -> None:
    # A framework adapter that says nothing more: no saved tool call the harness can edit.
    [reason] = not_applicable(_scenario(between_lives=(TAMPER,)), Capabilities(edits_native_session=False))
    assert reason.startswith("tamper_arguments cannot edit this agent's saved tool call: it keeps its own")


def test_tamper_arguments_applies_to_an_agent_whose_session_is_crashmatrixs_file() -> None:
    assert not_applicable(_scenario(between_lives=(TAMPER,)), Capabilities(edits_native_session=True)) == ()


def test_an_external_write_between_lives_applies_to_any_session() -> None:
    write = {"external_write": {"path": "notes.txt", "content": "x"}}
    assert not_applicable(_scenario(between_lives=(write,)), BARE) == ()


def test_several_tamper_steps_give_one_reason() -> None:
    steps = (TAMPER, {"external_write": {"path": "a", "content": "b"}}, TAMPER)
    assert not_applicable(_scenario(between_lives=steps), BARE) == (TAMPER_REASON,)


# --- approvals ------------------------------------------------------------------------------

NO_PROMPT = Capabilities(approvals=False)


@pytest.mark.parametrize("answer", ["no", "No", "NO", "n", "false", False])
def test_an_approval_answered_no_does_not_apply_to_an_agent_that_asks_none(answer: Any) -> None:
    # False is what YAML reads an unquoted no as; the other spellings are the same answer.
    assert not_applicable(_scenario(approvals={"send_email": answer}), NO_PROMPT) == (APPROVAL_REASON,)


@pytest.mark.parametrize("answer", ["yes", "y", "true", True, "nope"])
def test_an_approval_answered_other_than_no_applies_to_an_agent_that_asks_none(answer: Any) -> None:
    assert not_applicable(_scenario(approvals={"send_email": answer}), NO_PROMPT) == ()


def test_a_no_given_when_recovery_asks_again_counts_as_well() -> None:
    again = _scenario(approvals={"*": "yes"}, approvals_again={"send_email": "no"})
    assert not_applicable(again, NO_PROMPT) == (APPROVAL_REASON,)


def test_a_no_reaches_an_agent_that_asks_for_approval() -> None:
    answers = _scenario(approvals={"send_email": "no"}, approvals_again={"read_file": "no"})
    assert not_applicable(answers, Capabilities(approvals=True)) == ()


def test_several_noes_give_one_reason() -> None:
    noes = _scenario(approvals={"send_email": "no", "read_file": "no"}, approvals_again={"*": "no"})
    assert not_applicable(noes, NO_PROMPT) == (APPROVAL_REASON,)


# --- commands: a real shell, a tool that accepts only some values ---------------------------

PUBLISH = (
    Rule(When(role="user"), Reply(tool_calls=(("call_pub", "run_command", {"command": "npm publish"}),))),
)
AUDIT = (
    Rule(
        When(role="user"),
        Reply(tool_calls=(("call_log", "run_command", {"command": "echo a >> audit.log"}),)),
    ),
)
SHELL = dataclasses.replace(
    BASE, tools=("run_command",), contracts={"run_command": ToolContract(name="run_command")}
)
ONLY_AUDIT = {"cmd": (r"^echo .* >> audit\.log$",)}
REAL = Capabilities(tools=ToolMap({"run_command": ToolName("run_bash", {"command": "cmd"}, shell="real")}))
REAL_ONLY_AUDIT = Capabilities(
    tools=ToolMap({"run_command": ToolName("run_bash", {"command": "cmd"}, ONLY_AUDIT, "real")})
)
NPM_REASON = (
    "the scenario needs npm (needs:), which crashmatrix's simulated shell provides; "
    "this agent runs run_bash in a real shell (shell: real)"
)
OUTSIDE_REASON = (
    "call_pub calls run_bash with cmd 'npm publish', which matches none of the catalogue's "
    "only: '^echo .* >> audit\\.log$'"
)


def test_a_scenario_needing_npm_does_not_apply_to_a_real_shell() -> None:
    assert not_applicable(dataclasses.replace(SHELL, rules=PUBLISH, needs=("npm",)), REAL) == (NPM_REASON,)


def test_a_scenario_needing_npm_applies_to_the_simulator() -> None:
    # The reference agent and any agent the harness runs run_command for: the simulator has npm.
    npm = dataclasses.replace(SHELL, rules=PUBLISH, needs=("npm",))
    assert not_applicable(npm, NATIVE_CAPABILITIES) == ()
    simulated = Capabilities(tools=ToolMap({"run_command": ToolName("run_bash", {"command": "cmd"})}))
    assert not_applicable(npm, simulated) == ()


def test_a_scenario_needing_nothing_applies_to_a_real_shell() -> None:
    assert not_applicable(dataclasses.replace(SHELL, rules=AUDIT), REAL) == ()


def test_a_call_outside_only_names_the_call_the_argument_and_the_patterns() -> None:
    both = not_applicable(dataclasses.replace(SHELL, rules=PUBLISH, needs=("npm",)), REAL_ONLY_AUDIT)
    assert both == (NPM_REASON, OUTSIDE_REASON)
    assert not_applicable(dataclasses.replace(SHELL, rules=AUDIT), REAL_ONLY_AUDIT) == ()


def test_only_holds_every_call_of_the_script_not_just_the_first() -> None:
    rules = (
        *AUDIT,
        Rule(When(role="tool"), Reply(tool_calls=(("call_pub", "run_command", {"command": "npm publish"}),))),
    )
    assert not_applicable(dataclasses.replace(SHELL, rules=rules), REAL_ONLY_AUDIT) == (OUTSIDE_REASON,)


def test_a_tool_the_agent_lacks_gives_no_only_reason() -> None:
    # read_file's calls are not judged against anything: the missing tool already says why.
    reading = (Rule(When(role="user"), Reply(tool_calls=(("call_r", "read_file", {"path": "a"}),))),)
    only = Capabilities(tools=ToolMap({"send_email": ToolName("send_mail", only={"to": ("^x$",)})}))
    assert not_applicable(dataclasses.replace(BASE, rules=reading), only) == ("the agent has no read_file",)


# --- everything at once ---------------------------------------------------------------------


def test_every_reason_is_given_once_in_a_fixed_order() -> None:
    # tools, then faults, then between lives, then approvals: what the report shows first is
    # what an adapter would have to add first.
    agent = dataclasses.replace(BARE, tools=ToolMap({"send_email": ToolName("send_mail")}))
    everything = _scenario(
        faults=(TIMEOUT, {"tool": "read_file", "kind": "timeout_before"}),
        between_lives=(TAMPER,),
        approvals={"send_email": "no"},
    )
    assert not_applicable(everything, agent) == (
        "the agent has no read_file",
        FAULT_REASON,
        TAMPER_REASON,
        APPROVAL_REASON,
    )


# --- scenarios as the plugin loads them -----------------------------------------------------


def _loaded(tmp_path: Path, **keys: object) -> Scenario:
    path = tmp_path / "email_once.yaml"
    path.write_text(email_once(**keys), encoding="utf-8")
    return load_scenario(path)


def test_a_loaded_scenario_without_approvals_answers_yes_and_applies_without_a_prompt(
    tmp_path: Path,
) -> None:
    # load_scenario fills in approvals {"*": yes}: no "no" for an agent without a prompt.
    scenario = _loaded(tmp_path)
    assert scenario.approvals == {"*": "yes"}
    mail = Capabilities(
        tools=ToolMap({"send_email": ToolName("send_mail")}),
        served=frozenset(),
        approvals=False,
        edits_native_session=False,
    )
    assert not_applicable(scenario, mail) == ()


def test_a_loaded_scenario_with_a_fault_a_tamper_and_a_no_gives_each_reason(tmp_path: Path) -> None:
    tamper: Mapping[str, Any] = {"tamper_arguments": {"call": "call_1", "arguments": {"to": "b@example.com"}}}
    scenario = _loaded(
        tmp_path,
        faults=[TIMEOUT],
        between_lives=[tamper],
        approvals={"send_email": "no"},
    )
    assert not_applicable(scenario, NATIVE_CAPABILITIES) == ()
    assert not_applicable(scenario, BARE) == (FAULT_REASON, TAMPER_REASON, APPROVAL_REASON)
    assert not_applicable(scenario, Capabilities(tools=ToolMap({}))) == ("the agent has no send_email",)


@pytest.mark.parametrize(
    ("stem", "needs"),
    [
        ("npm_publish_never", ("npm",)),
        ("compound_ls_publish_never", ("npm",)),
        ("npm_test_again_yes", ("npm",)),
        ("echo_audit_append", ()),
        ("ls_replay", ()),
    ],
)
def test_the_suites_npm_scenarios_need_npm(stem: str, needs: tuple[str, ...]) -> None:
    scenario = load_scenario(Path(__file__).parents[3] / "scenarios" / "run_command" / f"{stem}.yaml")
    assert scenario.needs == needs
    assert bool(not_applicable(scenario, REAL)) == bool(needs)
    assert not_applicable(scenario, NATIVE_CAPABILITIES) == ()


def test_a_command_running_npm_needs_it_even_unlisted(tmp_path: Path) -> None:
    # crashmatrix explore writes scenarios without needs:; their npm commands still need npm.
    path = tmp_path / "explored.yaml"
    path.write_text(
        "name: explored\ntools: [run_command]\nturns: [go]\nmodel:\n"
        "  - when: {role: user}\n"
        "    reply: {tool_calls: [{id: c1, name: run_command, arguments: {command: 'ls; npm test'}}]}\n"
        "  - when: {role: tool}\n    reply: {content: done}\n",
        encoding="utf-8",
    )
    assert load_scenario(path).needs == ("npm",)


def test_a_scenario_relying_on_the_simulated_shell_itself_says_so(tmp_path: Path) -> None:
    path = tmp_path / "simulated.yaml"
    path.write_text(
        "name: simulated\ntools: [run_command]\nneeds: [simulated_shell]\nturns: [go]\nmodel:\n"
        "  - when: {role: user}\n"
        "    reply: {tool_calls: [{id: c1, name: run_command, arguments: {command: pwd}}]}\n"
        "  - when: {role: tool}\n    reply: {content: done}\n",
        encoding="utf-8",
    )
    scenario = load_scenario(path)
    assert scenario.needs == ("simulated_shell",)
    assert not_applicable(scenario, REAL) == (
        "the scenario needs simulated_shell (needs:), which crashmatrix's simulated shell provides; "
        "this agent runs run_bash in a real shell (shell: real)",
    )
    assert not_applicable(scenario, NATIVE_CAPABILITIES) == ()
