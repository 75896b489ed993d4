"""The scripted model where its script has no rule: a refusal (400) by default, plain words
that end the turn where the case asks for them (a tool-side case, ``unscripted``)."""

from __future__ import annotations

import json

import httpx

from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.mock_tools.model import ScriptedModel

RULES = (Rule(When(role="user", contains="hello"), Reply(content="hi")),)
UNPLANNED = {"messages": [{"role": "user", "content": "something the script never planned"}]}


def _ask(model: ScriptedModel, body: dict[str, object]) -> httpx.Response:
    request = httpx.Request("POST", "http://model.test/v1/chat/completions", content=json.dumps(body))
    return model.handle(request)


def test_a_request_no_rule_matches_is_refused_by_default() -> None:
    response = _ask(ScriptedModel(RULES), UNPLANNED)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "crashmatrix_no_rule"


def test_an_unscripted_reply_ends_the_turn_in_plain_words() -> None:
    model = ScriptedModel(RULES, unscripted="I will leave it here.")
    response = _ask(model, UNPLANNED)
    assert response.status_code == 200
    message = response.json()["choices"][0]["message"]
    assert message["content"] == "I will leave it here." and not message.get("tool_calls")
    # A rule that matches still answers by the script.
    scripted = _ask(model, {"messages": [{"role": "user", "content": "hello there"}]})
    assert scripted.json()["choices"][0]["message"]["content"] == "hi"
