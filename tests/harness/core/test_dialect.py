"""harness.core.dialect: how one agent words tool names, arguments and Tool Results."""

from __future__ import annotations

import dataclasses
import json

import pytest

from crashmatrix.harness.core.categories import AUTO, CRASHMATRIX, SEED000
from crashmatrix.harness.core.dialect import NATIVE, Dialect
from crashmatrix.harness.core.script import Reply, Rule, When, reply_message, reply_to
from crashmatrix.harness.core.toolmap import ToolMap, ToolName


def test_native_is_crashmatrix_results_under_the_suites_own_tool_names() -> None:
    assert NATIVE.results is CRASHMATRIX
    assert NATIVE.tools == ToolMap.identity()
    assert NATIVE.tools.tools is None


def test_a_dialect_reads_results_by_shape_and_keeps_tool_names_by_default() -> None:
    dialect = Dialect()
    assert dialect.results is AUTO
    assert dialect.tools == ToolMap.identity()


def test_native_reads_only_crashmatrix_shaped_results() -> None:
    # Where NATIVE and the default differ: a seed 000 status is nothing to NATIVE.
    unknown = json.dumps({"status": "unknown"})
    assert NATIVE.results.category(unknown) == "error"
    assert Dialect().results.category(unknown) == "uncertain"
    assert Dialect(SEED000).results.category(unknown) == "uncertain"


def test_dialects_are_frozen_values() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        NATIVE.results = AUTO  # type: ignore[misc]
    assert Dialect(CRASHMATRIX, ToolMap.identity()) == NATIVE


# An agent that calls send_email send_mail(recipient, ...) and words results as seed 000.
TEAM = Dialect(SEED000, ToolMap({"send_email": ToolName("send_mail", {"to": "recipient"})}))
RULES = (
    Rule(When(role="user"), Reply(tool_calls=(("call_1", "send_email", {"to": "a@example.com"}),))),
    Rule(When(tool="send_email", category=("uncertain",)), Reply(content="It may have been sent.")),
    Rule(When(role="tool"), Reply(content="Done.")),
)


def test_the_scripted_model_hands_out_calls_in_the_dialects_names_and_arguments() -> None:
    message = reply_message(RULES[0].reply, TEAM)
    function = message["tool_calls"][0]["function"]
    assert function["name"] == "send_mail"
    assert json.loads(function["arguments"]) == {"recipient": "a@example.com"}
    native = reply_message(RULES[0].reply, NATIVE)["tool_calls"][0]["function"]
    assert (native["name"], json.loads(native["arguments"])) == ("send_email", {"to": "a@example.com"})


def test_the_scripted_model_reads_the_agents_call_and_result_through_the_dialect() -> None:
    messages = [
        {"role": "user", "content": "Send it"},
        reply_message(RULES[0].reply, TEAM),
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"status": "unknown"})},
    ]
    # send_mail is read back as send_email and status: unknown as uncertain.
    assert reply_to(RULES, messages, TEAM).content == "It may have been sent."
    # Through NATIVE the same conversation matches neither the tool nor the category.
    assert reply_to(RULES, messages, NATIVE).content == "Done."
