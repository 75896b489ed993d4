"""The model boundary: every request reaches the scripted model, and no ledger line ever does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import respx
from respx.models import AllMockedAssertionError

from crashmatrix.harness.core.records import Message, MessageEntry, ToolCall
from crashmatrix.harness.core.script import Reply, Rule, When, chat_completion
from crashmatrix.harness.core.session_log import prompt_view
from crashmatrix.harness.session_file import read_session
from crashmatrix.mock_tools import MockToolbox
from crashmatrix.mock_tools.model import ScriptedModel
from crashmatrix.mock_tools.order_api import ORDERS_HOST
from crashmatrix.reference_agent.model import ModelSettings, OpenAIChatModel, make_openai_client
from tests.tls import CONTEXT

from .rig import Rig, SimulatedCrash, crash_at

WRITE = {"path": "a.txt", "content": "A"}
ORDER = {"item": "pen", "quantity": 1}
# write, order, read, answer: three tool rounds and a final answer (four model requests a turn).
RULES = [
    Rule(When(role="user"), Reply(tool_calls=(("call_w", "write_file", WRITE),))),
    Rule(When(role="tool", tool="write_file"), Reply(tool_calls=(("call_o", "create_order", ORDER),))),
    Rule(
        When(role="tool", tool="create_order"),
        Reply(tool_calls=(("call_r", "read_file", {"path": "a.txt"}),)),
    ),
    Rule(When(role="tool", tool="read_file"), Reply("all done")),
]
LEDGER_ONLY_FIELDS = {"execution_id", "idempotency_key", "arguments_sha256", "status", "type", "result"}


def test_model_requests_hit_the_mock_and_nothing_escapes(rig: Rig) -> None:
    agent, model = rig.agent(RULES)
    http = rig.http
    assert isinstance(agent.model, OpenAIChatModel)
    # openai 3.x would otherwise build its own httpx2 client, which respx does not patch.
    assert agent.model._client._client is http

    assert agent.run_turn("go") == "all done"

    entries = read_session(rig.session).entries
    rounds = sum(1 for e in entries if isinstance(e, MessageEntry) and e.message.role == "assistant")
    assert rounds == 4
    assert rig.model_route.call_count == len(model.requests) == rounds
    hosts = {call.request.url.host for call in rig.router.calls}
    assert hosts == {"model.test", ORDERS_HOST}
    model_calls = [c for c in rig.router.calls if c.request.url.host == "model.test"]
    assert [json.loads(c.request.content) for c in model_calls] == model.requests
    # Nothing can leave: an unmocked host raises instead of opening a connection, both for the
    # raw client and through openai (which wraps it as a connection error, max_retries=0).
    with pytest.raises(AllMockedAssertionError):
        http.get("http://escape.example/v1/models")
    escaping = OpenAIChatModel(
        make_openai_client(ModelSettings("http://escape.example/v1", "k", "m", max_retries=0), http), "m"
    )
    calls_before = len(rig.router.calls)
    with pytest.raises((AllMockedAssertionError, openai.APIConnectionError)) as caught:
        escaping.complete([Message("user", "hi").to_json()], [])
    chain = [caught.value, caught.value.__cause__, caught.value.__context__]
    assert any(isinstance(e, AllMockedAssertionError) for e in chain), chain
    assert rig.model_route.call_count == rounds, "the escaping request must not count as a model call"
    assert len(rig.router.calls) == calls_before, "respx records no call for an unmocked request"
    # The order tools went through the same intercepted client.
    toolbox = agent.toolbox
    assert isinstance(toolbox, MockToolbox) and toolbox.http is http
    assert isinstance(http, httpx.Client)


def test_no_ledger_record_in_any_model_request(rig: Rig) -> None:
    model = ScriptedModel(RULES)
    # Life 1 dies with write_file running; life 2 dies after the order's side effect; life 3 finishes.
    first, _ = rig.agent(model, hook=crash_at("after_running", "call_w"))
    with pytest.raises(SimulatedCrash):
        first.run_turn("go")
    first.close()
    second, _ = rig.agent(model, hook=crash_at("after_side_effect", "call_o"))
    with pytest.raises(SimulatedCrash):
        second.resume()
    second.close()
    third, _ = rig.agent(model)
    assert third.resume() == "all done"

    entries = read_session(rig.session).entries
    assert any(getattr(e, "status", None) == "unknown" for e in entries), "the run must include recovery"
    prefixes = [prompt_view(entries[:k]) for k in range(len(entries) + 1)]
    assert len(model.requests) >= 4
    for number, body in enumerate(model.requests, 1):
        text = json.dumps(body, ensure_ascii=False)
        assert "tool_execution" not in text, f"request {number} carries a ledger record"
        messages = body["messages"]
        for message in messages:
            assert set(message) <= {"role", "content", "tool_calls", "tool_call_id"}, message
            assert not (LEDGER_ONLY_FIELDS & set(message)), message
        assert messages in prefixes, f"request {number} is not the prompt view of a session prefix"
        assert messages[-1]["role"] in ("user", "tool")
    # The last request saw the whole conversation but the final answer.
    assert model.requests[-1]["messages"] == prompt_view(entries)[:-1]
    assert model.requests[-1]["messages"] == prefixes[len(entries) - 1]
    assert rig.world.snapshot().counts["orders"] == 1


# Headers that differ between any two requests of the same client (openai builds a fresh
# idempotency key per POST) or that name the calling method.
VOLATILE_HEADERS = {"idempotency-key", "x-stainless-retry-count", "x-stainless-read-timeout"}


def _builtin_request_bodies(tmp_path: Path) -> list[dict[str, Any]]:
    """Every model request the agent sends in the built-in scenarios' clean runs, and in a
    crash-and-recover run of each (tool results carrying recovery outcomes)."""
    from crashmatrix.harness.input.scenario import load_scenario
    from crashmatrix.harness.lives.injector import LifeLauncher, run_case
    from crashmatrix.harness.plan.enumeration import points_from_trace

    root = Path(__file__).resolve().parents[2] / "scenarios"
    launcher = LifeLauncher(
        "fork", preload=["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]
    )
    bodies: list[dict[str, Any]] = []
    paths = sorted(p for p in root.rglob("*.yaml") if "contracts" not in p.relative_to(root).parts)
    for index, path in enumerate(paths):
        scenario = load_scenario(path)
        runs = [run_case(tmp_path / f"{index}-clean", scenario, launcher)]
        crash = next((p for p in points_from_trace(runs[0].trace) if p.boundary == "after_running"), None)
        if crash is not None:
            runs.append(run_case(tmp_path / f"{index}-crash", scenario, launcher, point=crash))
        for run in runs:
            log = run.case_dir / "model_requests.jsonl"
            bodies += [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    return bodies


@pytest.mark.slow
def test_the_agent_sends_exactly_what_chat_completions_create_would(tmp_path: Path) -> None:
    # OpenAIChatModel posts its body without create()'s request transform (model.py): for
    # every request of the built-in scenarios, the same URL, JSON and headers come out.
    bodies = _builtin_request_bodies(tmp_path)
    assert len(bodies) > 100
    assert any(m.get("role") == "tool" for body in bodies for m in body["messages"])
    assert any(m.get("tool_calls") for body in bodies for m in body["messages"])
    answer = chat_completion(Reply(tool_calls=(("call_x", "read_file", {"path": "a"}),)), model="m", serial=1)
    with respx.mock(assert_all_mocked=True) as router, httpx.Client(verify=CONTEXT) as http:
        route = router.post("http://model.test/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=answer)
        )
        settings = ModelSettings("http://model.test/v1", "sk-test", "m", max_retries=0)
        client = make_openai_client(settings, http)
        for body in bodies:
            client.chat.completions.create(**body)
            reply = OpenAIChatModel(client, body["model"]).complete(body["messages"], body.get("tools", []))
            assert reply.tool_calls == (ToolCall("call_x", "read_file", '{"path": "a"}'),)
    sent = [call.request for call in route.calls]
    assert len(sent) == 2 * len(bodies)
    for via_create, via_agent in zip(sent[::2], sent[1::2], strict=True):
        assert via_agent.url == via_create.url
        assert json.loads(via_agent.content) == json.loads(via_create.content)
        stable = {k: v for k, v in via_create.headers.items() if k not in VOLATILE_HEADERS}
        assert {k: v for k, v in via_agent.headers.items() if k not in VOLATILE_HEADERS} == stable
    assert sent[1].headers["authorization"] == "Bearer sk-test"
