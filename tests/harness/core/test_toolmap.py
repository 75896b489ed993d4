"""harness.core.toolmap: the suite's tool names and arguments in an agent's terms, both ways."""

from __future__ import annotations

import dataclasses

import pytest

from crashmatrix.harness.core.toolmap import ToolMap, ToolName

# An agent that calls send_email send_mail(recipient, title, text), has create_order under its
# own name with one argument renamed, and has no read_file at all.
TEAM = ToolMap(
    {
        "send_email": ToolName("send_mail", {"to": "recipient", "subject": "title", "body": "text"}),
        "create_order": ToolName("create_order", {"quantity": "qty"}),
        "list_files": ToolName("ls"),
    }
)


# --- identity -------------------------------------------------------------------------------


def test_identity_is_the_map_of_every_tool_under_its_own_name() -> None:
    identity = ToolMap.identity()
    assert identity.tools is None
    assert identity == ToolMap()  # the default of Dialect and Capabilities


def test_identity_has_every_tool_and_misses_none() -> None:
    identity = ToolMap.identity()
    assert identity.has("send_email")
    assert identity.has("a_tool_no_contract_defines")
    assert identity.missing(["send_email", "read_file"]) == []


def test_identity_keeps_tool_names_both_ways() -> None:
    identity = ToolMap.identity()
    assert identity.agent_name("send_email") == "send_email"
    assert identity.suite_name("send_email") == "send_email"


def test_identity_keeps_arguments_as_given_in_a_new_dict() -> None:
    identity = ToolMap.identity()
    arguments = {"to": "a@example.com", "subject": "Invoice"}
    shaped = identity.agent_arguments("send_email", arguments)
    assert shaped == arguments
    shaped["to"] = "b@example.com"  # the caller may edit its copy without touching the rule
    assert arguments["to"] == "a@example.com"


def test_identity_lists_no_renamed_tools() -> None:
    assert ToolMap.identity().suite_names() == {}


# --- which tools the agent has --------------------------------------------------------------


def test_a_catalogue_has_the_tools_it_lists_only() -> None:
    assert TEAM.has("send_email")
    assert TEAM.has("create_order")
    assert not TEAM.has("read_file")
    # The agent's own name for a tool is not a suite tool it has.
    assert not TEAM.has("send_mail")


def test_missing_lists_the_tools_the_agent_lacks_in_the_order_asked() -> None:
    assert TEAM.missing(["write_file", "send_email", "read_file"]) == ["write_file", "read_file"]
    assert TEAM.missing(("send_email", "create_order")) == []
    assert TEAM.missing([]) == []


def test_an_empty_catalogue_has_no_tools() -> None:
    # An adapter that lists no tools is not the identity: it has none of the suite's tools.
    empty = ToolMap({})
    assert not empty.has("send_email")
    assert empty.missing(["send_email"]) == ["send_email"]
    assert empty.suite_names() == {}


# --- names ----------------------------------------------------------------------------------


def test_agent_name_gives_the_agents_name_for_a_suite_tool() -> None:
    assert TEAM.agent_name("send_email") == "send_mail"
    assert TEAM.agent_name("list_files") == "ls"
    assert TEAM.agent_name("create_order") == "create_order"


def test_agent_name_keeps_the_name_of_a_tool_the_map_does_not_list() -> None:
    assert TEAM.agent_name("read_file") == "read_file"


def test_suite_name_reads_the_agents_call_back_as_the_suite_tool() -> None:
    assert TEAM.suite_name("send_mail") == "send_email"
    assert TEAM.suite_name("ls") == "list_files"
    assert TEAM.suite_name("create_order") == "create_order"


def test_suite_name_keeps_a_name_the_map_does_not_give_any_tool() -> None:
    assert TEAM.suite_name("delete_everything") == "delete_everything"


def test_suite_name_does_not_read_a_suite_name_the_agent_renamed_as_that_tool() -> None:
    # The agent calls send_email's tool send_mail; a call named send_email is something else
    # (returned unchanged), so a rule on send_email does not fire for it by accident.
    assert TEAM.suite_name("send_email") == "send_email"
    assert TEAM.agent_name(TEAM.suite_name("send_mail")) == "send_mail"


def test_names_swapped_between_two_tools_map_each_way() -> None:
    # An agent whose names cross the suite's: its read_file is the suite's list_files.
    crossed = ToolMap({"read_file": ToolName("list_files"), "list_files": ToolName("read_file")})
    assert crossed.agent_name("read_file") == "list_files"
    assert crossed.suite_name("list_files") == "read_file"
    assert crossed.suite_name("read_file") == "list_files"
    assert crossed.suite_names() == {"list_files": "read_file", "read_file": "list_files"}


def test_suite_names_lists_the_agents_names_that_differ_from_the_suites() -> None:
    # The verdict reads the agent's session through this: create_order needs no translation.
    assert TEAM.suite_names() == {"send_mail": "send_email", "ls": "list_files"}


@pytest.mark.parametrize("suite_tool", ["send_email", "create_order", "list_files"])
def test_every_listed_tool_round_trips_through_its_agent_name(suite_tool: str) -> None:
    assert TEAM.suite_name(TEAM.agent_name(suite_tool)) == suite_tool


# --- arguments ------------------------------------------------------------------------------


def test_agent_arguments_renames_each_mapped_argument() -> None:
    shaped = TEAM.agent_arguments("send_email", {"to": "a@example.com", "subject": "Invoice", "body": "hi"})
    assert shaped == {"recipient": "a@example.com", "title": "Invoice", "text": "hi"}


def test_agent_arguments_keeps_the_names_of_unmapped_arguments() -> None:
    shaped = TEAM.agent_arguments("create_order", {"item": "chair", "quantity": 2})
    assert shaped == {"item": "chair", "qty": 2}


def test_agent_arguments_keeps_the_values_untouched() -> None:
    nested = {"lines": [1, 2], "meta": {"to": "not renamed inside"}}
    shaped = TEAM.agent_arguments("send_email", {"to": nested})
    assert shaped == {"recipient": nested}


def test_agent_arguments_of_a_tool_without_renames_or_not_listed_are_a_copy() -> None:
    arguments = {"path": "notes.txt"}
    assert TEAM.agent_arguments("list_files", arguments) == {"path": "notes.txt"}
    unlisted = TEAM.agent_arguments("read_file", arguments)
    assert unlisted == {"path": "notes.txt"}
    assert unlisted is not arguments


def test_agent_arguments_keeps_the_order_of_the_call() -> None:
    # The arguments are serialized as JSON for the agent: the order the rule wrote is kept.
    shaped = TEAM.agent_arguments("send_email", {"body": "hi", "to": "a@example.com"})
    assert list(shaped) == ["text", "recipient"]


def test_the_arguments_of_one_tool_are_not_renamed_by_another_tools_map() -> None:
    # create_order renames quantity; send_email does not, and keeps it as it is.
    assert TEAM.agent_arguments("send_email", {"quantity": 3}) == {"quantity": 3}


# --- values ---------------------------------------------------------------------------------


def test_a_tool_name_has_no_renamed_arguments_by_default() -> None:
    assert ToolName("send_mail").arguments == {}


def test_tool_maps_are_frozen_values() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        TEAM.tools = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ToolName("x").name = "y"  # type: ignore[misc]


# --- what the agent's tool is: a real shell, the values it accepts -------------------------

SHELL = ToolMap(
    {
        "run_command": ToolName(
            "run_bash", {"command": "cmd"}, {"cmd": (r"^echo .* >> audit\.log$",)}, "real"
        ),
        "create_order": ToolName("order", {"quantity": "qty"}, {"qty": ("^[1-9]$",)}),
        "send_email": ToolName("send_mail"),
    }
)


def test_only_a_tool_declared_shell_real_is_a_real_shell() -> None:
    assert SHELL.real_shell("run_command")
    assert not SHELL.real_shell("send_email")
    assert not SHELL.real_shell("read_file")  # not in the catalogue at all
    assert not ToolMap.identity().real_shell("run_command")  # the reference agent: the simulator


def test_a_call_inside_only_is_accepted() -> None:
    assert SHELL.outside("run_command", {"command": "echo sent >> audit.log"}) == []
    assert SHELL.outside("create_order", {"item": "pens", "quantity": 3}) == []


def test_a_call_outside_only_names_the_argument_as_the_agent_calls_it() -> None:
    [outside] = SHELL.outside("run_command", {"command": "npm publish"})
    assert (outside.argument, outside.value, outside.patterns) == (
        "cmd",
        "npm publish",
        (r"^echo .* >> audit\.log$",),
    )


def test_only_sees_a_value_that_is_not_text_as_json() -> None:
    [outside] = SHELL.outside("create_order", {"item": "pens", "quantity": 12})
    assert (outside.argument, outside.value) == ("qty", "12")


def test_a_tool_without_only_accepts_every_call() -> None:
    assert SHELL.outside("send_email", {"to": "x", "subject": "y", "body": "z"}) == []
    assert ToolMap.identity().outside("run_command", {"command": "npm publish"}) == []
