"""The loopback servers and the foreign-agent plumbing that needs no agent process:
adapter YAML errors, ledger normalisation, stdin answers, boundary wrapping."""

from __future__ import annotations

import contextlib
import http.client
import json
import types
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.agents.adapter_file import BoundaryRule, Where, load_foreign
from crashmatrix.harness.agents.foreign_session import LedgerMap, read_foreign_session
from crashmatrix.harness.agents.loopback import LoopbackServer, _Freezer
from crashmatrix.harness.agents.python_agent import install_boundaries
from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.harness.core.tools import ToolContext, ToolObservation
from crashmatrix.harness.errors import SessionCorruption, YamlError
from crashmatrix.mock_tools.model import ScriptedModel

ROOT = Path(__file__).resolve().parents[3]


def _post(url: str, body: Any, headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


class _Tools:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], ToolContext]] = []

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation:
        self.calls.append((name, dict(arguments), ctx))
        return ToolObservation(ok=True, data={"order": 1})


def _server(tmp_path: Path, edges: list[tuple[str, str]], tools: _Tools | None = None) -> LoopbackServer:
    model = ScriptedModel(
        [Rule(When(role="user"), Reply(tool_calls=(("call_1", "create_order", {"item": "x"}),)))],
        log_path=tmp_path / "requests.jsonl",
    )
    return LoopbackServer(model, tools=tools, on_edge=lambda b, c: edges.append((b, c)))


def test_model_route_answers_like_openai_and_logs_the_request(tmp_path: Path) -> None:
    edges: list[tuple[str, str]] = []
    with _server(tmp_path, edges) as server:
        status, body = _post(
            f"{server.model_url}/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}
        )
    assert status == 200
    assert body["choices"][0]["message"]["tool_calls"][0]["id"] == "call_1"
    assert edges == [("after_model_reply", "call_1")]
    assert json.loads((tmp_path / "requests.jsonl").read_text())["messages"][0]["content"] == "hi"


def test_model_route_refuses_streaming(tmp_path: Path) -> None:
    with _server(tmp_path, []) as server:
        status, body = _post(f"{server.model_url}/chat/completions", {"messages": [], "stream": True})
    assert status == 400 and "stream" in body["error"]["message"]


def test_tool_route_runs_the_tool_between_its_two_edges(tmp_path: Path) -> None:
    edges: list[tuple[str, str]] = []
    tools = _Tools()

    def on_edge(boundary: str, call_id: str) -> None:
        edges.append((boundary, f"{call_id}:{len(tools.calls)}"))

    server = LoopbackServer(ScriptedModel([]), tools=tools, on_edge=on_edge)
    with server:
        status, body = _post(
            f"{server.tools_url}/create_order",
            {"item": "x"},
            {"X-Tool-Call-Id": "call_1", "X-Execution-Id": "exec_1", "Idempotency-Key": "k1"},
        )
    assert status == 200 and body["ok"] is True and body["execution_id"] == "exec_1"
    assert edges == [("after_running", "call_1:0"), ("after_side_effect", "call_1:1")]
    name, arguments, ctx = tools.calls[0]
    assert (name, arguments, ctx.idempotency_key) == ("create_order", {"item": "x"}, "k1")


def test_tool_route_needs_the_tool_call_id_header(tmp_path: Path) -> None:
    with LoopbackServer(ScriptedModel([]), tools=_Tools(), on_edge=lambda b, c: None) as server:
        status, body = _post(f"{server.tools_url}/create_order", {"item": "x"})
    assert status == 400 and "X-Tool-Call-Id" in body["error"]["message"]


def test_oversized_body_is_refused(tmp_path: Path) -> None:
    with LoopbackServer(ScriptedModel([]), tools=_Tools(), on_edge=lambda b, c: None) as server:
        host, port = server.base_url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        # Announce a huge body and send none: the server must answer without reading it.
        connection.putrequest("POST", "/tools/x")
        connection.putheader("Content-Length", str(2 << 20))
        connection.endheaders()
        status = connection.getresponse().status
        connection.close()
    assert status == 413


def test_server_listens_on_loopback_only() -> None:
    server = LoopbackServer(ScriptedModel([]), on_edge=lambda b, c: None)
    try:
        assert server.base_url.startswith("http://127.0.0.1:")
    finally:
        server.close()


# -- foreign sessions ------------------------------------------------------------------------

SEED004 = LedgerMap(type_field="kind", ledger_type="ledger")


def _lines(*records: Mapping[str, Any]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def test_seed_004_ledger_is_normalised_onto_our_statuses_and_attempts(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    call = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    path.write_bytes(
        _lines(
            {"kind": "message", "message": {"role": "user", "content": "go"}},
            {"kind": "message", "message": {"role": "assistant", "content": "", "tool_calls": [call]}},
            {"kind": "ledger", "callId": "c1", "toolName": "t", "status": "planned"},
            {"kind": "ledger", "callId": "c1", "toolName": "t", "status": "started"},
            {"kind": "ledger", "callId": "c1", "toolName": "t", "status": "uncertain"},
            {"kind": "ledger", "callId": "c1", "toolName": "t", "status": "approved"},
            {"kind": "agent_metadata", "note": "not ours to judge"},
        )
        + b'{"kind": "ledger", "callId'
    )
    log, lines = read_foreign_session(path, SEED004)
    ledger = [(e.status, e.execution_id) for e in log.entries if hasattr(e, "status")]
    assert ledger == [("planned", "c1#1"), ("running", "c1#1"), ("unknown", "c1#1"), ("approved", "c1#2")]
    assert log.torn_tail is not None and len(log.entries) == len(lines) == 6
    assert log.offsets[-1] == sum(map(len, lines))


def test_adapter_mapping_renames_fields_and_statuses(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(
        _lines({"type": "tool_execution", "attempt": "a1", "call": "c1", "state": "in_progress"})
    )
    mapping = LedgerMap(
        fields={"attempt": "execution_id", "call": "tool_call_id", "state": "status"},
        statuses={"in_progress": "running"},
    )
    (entry,) = read_foreign_session(path, mapping)[0].entries
    assert (entry.execution_id, entry.tool_call_id, entry.status) == ("a1", "c1", "running")  # type: ignore[union-attr]


def test_a_bad_complete_line_is_corruption_named_by_the_agents_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"kind": "ledger", "status": "started"}\n')
    with pytest.raises(SessionCorruption, match=r"s\.jsonl:1: .*no tool call id"):
        read_foreign_session(path, SEED004)


# -- the adapter file ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("name: a\ncommand: [x]\nsurprise: 1\n", r":3:1: surprise: unknown key 'surprise'"),
        (
            "name: a\ncommand: [x]\napprovals:\n  prompt: 'Approve ('\n",
            r":4:3: approvals\.prompt: not a regular",
        ),
        ("name: a\ncommand: [x]\nsession: {path: .agent_state/session-case.jsonl}\n", r"choose another name"),
        (
            "name: a\ncommand: [x]\nboundaries: [{function: f, boundary: after_running}]\n",
            r"only a 'python:' agent",
        ),
        ("name: a\npython: {script: missing.py}\n", r":2:10: python\.script: no file"),
    ],
)
def test_bad_adapter_yaml_is_one_line_with_its_position(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "adapter.yaml"
    path.write_text(text)
    with pytest.raises(YamlError, match=where) as caught:
        load_foreign(path)
    assert "\n" not in str(caught.value)


STUB = ROOT / "tests/harness/data/broken/agent_stub.py"


def test_a_rule_without_call_id_loads_when_another_rule_names_the_call_even_listed_after_it(
    tmp_path: Path,
) -> None:
    # The last call a rule named is the last in time (python_agent.Marks), not in the list:
    # append_entry saves the call before send_mail runs, whichever rule is written first.
    path = tmp_path / "adapter.yaml"
    path.write_text(
        f"name: a\npython: {{script: {STUB}}}\ntools: agent\nboundaries:\n"
        "  - {function: send_mail, boundary: after_side_effect}\n"
        "  - {function: append_entry, boundary: after_running, call_id: {argument: record, key: id}}\n"
    )
    rules = load_foreign(path).rules
    assert [(rule.function, rule.call_id) for rule in rules] == [
        ("send_mail", None),
        ("append_entry", ("record", "id")),
    ]


def test_shipped_examples_load() -> None:
    assert load_foreign(ROOT / "examples/python_agent/adapter.yaml").kind == "python"
    assert load_foreign(ROOT / "examples/blackbox_agent/adapter.yaml").kind == "command"
    # And every adapter file of every example, as its scenarios and docs use it.
    adapters = sorted(ROOT.glob("examples/*/adapter*.yaml"))
    assert len(adapters) >= 7
    assert all(load_foreign(path).name for path in adapters)


# -- boundaries in an unmodified module ---------------------------------------------------------


def test_wrapped_function_fires_its_boundary_only_when_the_condition_holds() -> None:
    module = types.ModuleType("agent_under_test")
    written: list[dict[str, Any]] = []

    def append_entry(path: str, record: dict[str, Any]) -> None:
        written.append(record)

    def side_effect() -> str:
        return "done"

    module.append_entry = append_entry  # type: ignore[attr-defined]
    module.side_effect = side_effect  # type: ignore[attr-defined]
    fired: list[tuple[str, str, int]] = []
    install_boundaries(
        module,
        [
            BoundaryRule(
                "append_entry",
                "after_running",
                where=(Where("record", "status", "equals", "running"),),
                call_id=("record", "tool_call_id"),
            ),
            BoundaryRule("side_effect", "after_side_effect"),
        ],
        lambda boundary, call: fired.append((boundary, call, len(written))),
    )
    module.append_entry("s", {"status": "approved", "tool_call_id": "c1"})
    module.append_entry("s", record={"status": "running", "tool_call_id": "c1"})
    assert module.side_effect() == "done"
    assert fired == [("after_running", "c1", 2), ("after_side_effect", "c1", 2)]


@pytest.mark.parametrize("indent", [None, 2])
def test_the_model_logs_each_request_as_one_json_line_whatever_its_layout(
    tmp_path: Path, indent: int | None
) -> None:
    # Compact bodies are logged as received; a body with line breaks is re-encoded, since
    # the log is one request per line.
    import httpx

    model = ScriptedModel([Rule(When(role="user"), Reply(content="ok"))], log_path=tmp_path / "log.jsonl")
    body = {"messages": [{"role": "user", "content": "line one\nline two"}], "model": "m"}
    raw = json.dumps(body, indent=indent).encode()
    for _ in range(2):
        response = model.handle(httpx.Request("POST", "http://model.test/v1/chat/completions", content=raw))
        assert response.status_code == 200
    lines = (tmp_path / "log.jsonl").read_bytes().splitlines()
    assert [json.loads(line) for line in lines] == [body, body]
    assert (lines[0] == raw) is (indent is None)


@pytest.mark.parametrize(
    ("example", "watched"),
    [
        ("blackbox_agent", None),  # tools: harness: every tool is a mock tool the world records
        ("desk_agent", frozenset({"send_email", "create_order"})),  # effects:
        ("http_agent", frozenset({"send_email", "create_order"})),  # services: mail, orders
        ("memo_agent", frozenset({"send_email", "create_order"})),  # effects: + services:
        ("state_agent", frozenset({"send_email", "create_order"})),  # intercept:
        ("python_agent", frozenset()),  # runs its own tools and declares no effect source
    ],
)
def test_the_tools_whose_effects_the_world_watches_come_from_the_adapter(
    example: str, watched: frozenset[str] | None
) -> None:
    assert load_foreign(ROOT / "examples" / example / "adapter.yaml").watched == watched


def test_freezes_nest_across_threads_the_agent_resumed_only_at_the_last_ones_end() -> None:
    # Two request threads, or a response held until /mcp/sent, overlap: the first to end must
    # not resume an agent another edge's hook may be about to kill.
    events: list[str] = []

    @contextlib.contextmanager
    def stop() -> Iterator[None]:
        events.append("stop")
        yield
        events.append("resume")

    freeze = _Freezer(stop)
    with freeze():
        with freeze():
            assert events == ["stop"]
        assert events == ["stop"]
    assert events == ["stop", "resume"]
    with freeze():
        pass
    assert events == ["stop", "resume", "stop", "resume"]
