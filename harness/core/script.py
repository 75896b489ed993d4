"""A rule-based model that answers OpenAI chat-completion requests.

It is stateless on purpose: the reply depends only on the conversation in the request, so a
restarted agent that asks again gets the same answer, whichever process asks. Rules are
tried in order against the latest message; the first that matches replies. A rule whose
tool calls are already in the current turn has fired before and is skipped, which is how a
script says "once per turn" without keeping state.

Every request body is appended to a log (one JSON line, written with a single ``write``
so it survives the agent's SIGKILL), which is how the harness checks that requests hit the
mock and that no ledger record ever reached the model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crashmatrix.harness.core.dialect import NATIVE, Dialect
from crashmatrix.harness.core.records import content_text

__all__ = ["NoRuleMatched", "Reply", "Rule", "When", "chat_completion", "reply_message", "reply_to"]


@dataclass(frozen=True, slots=True)
class When:
    """Conditions on the latest message. Unset fields match anything.

    ``role``: "user" or "tool". ``contains``: substring of its content. For tool results:
    ``tool`` (the suite's name of the tool), ``call`` (tool_call_id), ``category`` (what the
    model was told, read through the agent's dialect: succeeded, replayed, error, uncertain,
    conflict, rejected; see ``harness.core.categories``) -- portable to any agent -- and
    ``ok``, ``code``, ``status``, ``recovery``, read from the JSON content of crashmatrix's
    own shape (a rule using them drives only agents that answer in that shape).
    """

    role: str | None = None
    contains: str | None = None
    tool: str | None = None
    call: str | None = None
    ok: bool | None = None
    code: str | None = None
    status: str | None = None
    recovery: str | None = None
    category: tuple[str, ...] | None = None  # any of these


@dataclass(frozen=True, slots=True)
class Reply:
    content: str = ""
    tool_calls: tuple[tuple[str, str, Mapping[str, Any]], ...] = ()  # (id, name, arguments)


@dataclass(frozen=True, slots=True)
class Rule:
    when: When
    reply: Reply
    line: int = 0  # where the rule stands in its scenario file, for messages


class NoRuleMatched(LookupError):
    def __init__(self, latest: Mapping[str, Any]) -> None:
        self.latest = dict(latest)
        text = json.dumps(self.latest, ensure_ascii=False)[:300]
        super().__init__(f"no scripted-model rule matches the latest message {text}; add a rule for it")


def _tool_name_of(messages: Sequence[Mapping[str, Any]], call_id: str) -> str | None:
    for message in reversed(messages):
        for call in message.get("tool_calls") or ():
            if call.get("id") == call_id:
                return str((call.get("function") or {}).get("name"))
    return None


def _matches(when: When, messages: Sequence[Mapping[str, Any]], dialect: Dialect) -> bool:
    latest = messages[-1]
    role = latest.get("role")
    content = content_text(latest.get("content")) or ""
    if when.role is not None and role != when.role:
        return False
    if when.contains is not None and when.contains not in content:
        return False
    tool_fields = (when.tool, when.call, when.ok, when.code, when.status, when.recovery, when.category)
    if all(value is None for value in tool_fields):
        return True
    if role != "tool":
        return False
    call_id = str(latest.get("tool_call_id"))
    if when.call is not None and call_id != when.call:
        return False
    if when.tool is not None:
        called = _tool_name_of(messages, call_id)
        if called is None or dialect.tools.suite_name(called) != when.tool:
            return False
    if when.category is not None and dialect.results.category(content) not in when.category:
        return False
    try:
        body = json.loads(content)
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    checks = (("ok", when.ok), ("code", when.code), ("status", when.status), ("recovery", when.recovery))
    return all(expected is None or body.get(key) == expected for key, expected in checks)


def _already_fired(reply: Reply, messages: Sequence[Mapping[str, Any]]) -> bool:
    """A rule's tool calls are made once per TURN: a new user message is a new request, and
    a model answering it may well reuse an id (providers do reuse ``call_0``)."""
    if not reply.tool_calls:
        return False
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    seen = {
        call.get("id")
        for message in messages[last_user + 1 :]
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or ()
    }
    return any(call_id in seen for call_id, _, _ in reply.tool_calls)


def reply_to(
    rules: Sequence[Rule], messages: Sequence[Mapping[str, Any]], dialect: Dialect = NATIVE
) -> Reply:
    """The scripted model's answer to a conversation: the first rule that matches the latest
    message and has not fired in this turn. Stateless, so anyone can ask again: the harness
    recomputes the last answer of a case from its request log. The reply is in the suite's
    terms; ``reply_message`` puts it in the agent's."""
    if not messages:
        raise NoRuleMatched({})
    for rule in rules:
        if _matches(rule.when, messages, dialect) and not _already_fired(rule.reply, messages):
            return rule.reply
    raise NoRuleMatched(messages[-1])


def reply_message(reply: Reply, dialect: Dialect = NATIVE) -> dict[str, Any]:
    """The assistant message of a reply, as the agent would save it: its tool names and
    argument shapes."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": dialect.tools.agent_name(name),
                    "arguments": json.dumps(dialect.tools.agent_arguments(name, args), ensure_ascii=False),
                },
            }
            for call_id, name, args in reply.tool_calls
        ]
    return message


def chat_completion(reply: Reply, *, model: str, serial: int, dialect: Dialect = NATIVE) -> dict[str, Any]:
    """An OpenAI chat.completion object for ``reply``, in the agent's dialect."""
    message = reply_message(reply, dialect)
    return {
        "id": f"chatcmpl-crashmatrix-{serial}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                "message": message,
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
