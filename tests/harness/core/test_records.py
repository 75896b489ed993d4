"""harness/core/records.py (and script.py, which reads the same way): a message's content as
the text the model reads."""

from __future__ import annotations

import json

from crashmatrix.harness.core.records import Message, content_text
from crashmatrix.harness.core.script import Reply, Rule, When, reply_to


def test_a_list_of_text_parts_is_read_as_its_text() -> None:
    # What the Agents SDK sends as an MCP tool's output (chat) and saves (Responses items).
    result = json.dumps({"ok": True, "status": "succeeded"})
    assert content_text([{"type": "text", "text": result}]) == result
    assert content_text([{"type": "input_text", "text": "a"}, {"type": "output_text", "text": "b"}]) == "ab"
    sent = Message.from_json(
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": result}]}
    )
    saved = Message.from_json(
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "input_text", "text": result}]}
    )
    assert sent == saved and sent.content == result


def test_other_content_stays_json() -> None:
    image = [{"type": "image_url", "image_url": {"url": "data:"}}]
    assert content_text(image) == json.dumps(image)
    assert content_text([]) == "[]"
    assert content_text({"ok": True}) == json.dumps({"ok": True})
    assert content_text("plain") == "plain"
    assert content_text(None) is None


def test_the_scripted_model_reads_a_tool_result_sent_as_text_parts() -> None:
    # Before, json.dumps(list): an MCP tool's success read as "error" by every category rule.
    said = Reply(content="Sent.")
    rules = [
        Rule(When(tool="send_email", category=("succeeded",)), said),
        Rule(When(role="tool"), Reply(content="Something went wrong.")),
    ]
    call = {"id": "c", "type": "function", "function": {"name": "send_email", "arguments": "{}"}}
    result = json.dumps({"ok": True, "status": "succeeded"})
    messages = [
        {"role": "user", "content": "mail"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": result}]},
    ]
    assert reply_to(rules, messages) == said
