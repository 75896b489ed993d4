"""The LangGraph adapter (``--agent=langgraph:package.module:factory``): bad factories refused
in one line, the graph's model requests reaching crashmatrix's mocks, and a real crash after a
tool's effect: LangGraph's default ToolNode agent sends the email again on resume, the example
whose tools consult a ledger does not, and recovers by contract (a lookup by key, a file's
hashes); the model-reply boundaries killed where they say, the resumed graph sending once;
approvals answered through interrupt() / Command(resume=...), and what LangGraph does with a
saved approval after a crash."""

from __future__ import annotations

import functools
import json
import sqlite3
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("langgraph")
respx = pytest.importorskip("respx")

from crashmatrix.harness.agents.frameworks import langgraph as lg  # noqa: E402
from crashmatrix.harness.agents.loading import load_adapter  # noqa: E402
from crashmatrix.harness.agents.protocol import MODEL_BASE_URL  # noqa: E402
from crashmatrix.harness.core.boundaries import parse_point  # noqa: E402
from crashmatrix.harness.errors import InputError  # noqa: E402

from .pytest_agent import collected_and_clean  # noqa: E402

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[4]
SUITE = ROOT / "scenarios"
EXAMPLE = "examples.langgraph_agent.agent"


@pytest.fixture
def user_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A team's module with factories, one per way of getting it wrong."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import START, MessagesState, StateGraph

    def graph(ctx: lg.GraphContext | None = None) -> StateGraph:
        g = StateGraph(MessagesState)
        if ctx is None:
            g.add_node("agent", lambda state: {"messages": []})
        else:  # asks crashmatrix's model, as an agent does
            g.add_node("agent", lambda state: {"messages": [ctx.model.invoke(state["messages"])]})
        g.add_edge(START, "agent")
        return g

    module = types.ModuleType("crashmatrix_lg_user")
    module.no_checkpointer = lambda ctx: graph().compile()  # type: ignore[attr-defined]
    module.memory = lambda ctx: graph().compile(checkpointer=InMemorySaver())  # type: ignore[attr-defined]
    module.elsewhere = lambda ctx: graph().compile(  # type: ignore[attr-defined]
        checkpointer=SqliteSaver(sqlite3.connect(ctx.workspace / "other.sqlite", check_same_thread=False))
    )
    module.not_a_graph = lambda ctx: graph()  # type: ignore[attr-defined]
    module.raises = lambda ctx: 1 / 0  # type: ignore[attr-defined]
    module.good = lambda ctx: graph(ctx).compile(  # type: ignore[attr-defined]
        checkpointer=SqliteSaver(sqlite3.connect(ctx.checkpoint_path, check_same_thread=False))
    )
    # Never asks ctx.model: its own client, which a life cannot serve on this path.
    module.own_model = lambda ctx: graph().compile(  # type: ignore[attr-defined]
        checkpointer=SqliteSaver(sqlite3.connect(ctx.checkpoint_path, check_same_thread=False))
    )

    def picks(ctx: lg.GraphContext) -> object:
        """A team's factory that picks its tools by name, and runs only those."""
        from langgraph.prebuilt import ToolNode

        tools = {tool.name: tool for tool in ctx.tools}
        g = graph(ctx)
        g.add_node("tools", ToolNode([tools["send_email"], tools["create_order"]]))
        return g.compile(
            checkpointer=SqliteSaver(sqlite3.connect(ctx.checkpoint_path, check_same_thread=False))
        )

    module.picks = picks  # type: ignore[attr-defined]

    def takes_all(ctx: lg.GraphContext) -> object:
        from langgraph.prebuilt import ToolNode

        g = graph(ctx)
        g.add_node("tools", ToolNode(list(ctx.tools)))
        return g.compile(
            checkpointer=SqliteSaver(sqlite3.connect(ctx.checkpoint_path, check_same_thread=False))
        )

    module.takes_all = takes_all  # type: ignore[attr-defined]

    def asking(ctx: lg.GraphContext) -> object:
        ctx.asks_for_approval()
        return module.good(ctx)  # type: ignore[attr-defined]

    module.asking = asking  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(lg, "_LOADED", {})
    return module


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("crashmatrix_lg_user:no_checkpointer", "has no checkpointer"),
        ("crashmatrix_lg_user:memory", "checkpointer is InMemorySaver"),
        ("crashmatrix_lg_user:elsewhere", "not ctx.checkpoint_path"),
        ("crashmatrix_lg_user:not_a_graph", "not a compiled graph"),
        ("crashmatrix_lg_user:raises", "the factory raised ZeroDivisionError"),
        ("crashmatrix_lg_user:own_model", "a turn through the graph never asked ctx.model"),
        ("crashmatrix_lg_user:missing", "has no function 'missing'"),
        ("no_such_module_here:build", "cannot import 'no_such_module_here'"),
    ],
)
def test_a_bad_factory_is_one_line_naming_the_agent_value(
    user_module: types.ModuleType, target: str, says: str
) -> None:
    spec = f"langgraph:{target}"
    with pytest.raises(InputError) as caught:
        load_adapter(spec)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"--agent={spec!r}")
    assert says in message


def test_a_graph_with_a_sqlite_checkpointer_at_the_case_path_is_accepted(
    user_module: types.ModuleType,
) -> None:
    adapter = load_adapter("langgraph:crashmatrix_lg_user:good")
    assert adapter.keeps_ledger is False
    assert "langchain_openai" in adapter.preload  # type: ignore[attr-defined]
    assert "crashmatrix_lg_user" in adapter.preload  # type: ignore[attr-defined]
    assert isinstance(adapter.power_session(Path("/x")), str)  # type: ignore[attr-defined]
    assert adapter.torn_write_unreachable  # type: ignore[attr-defined]
    # Its factory does not say the graph asks: approval scenarios are not applicable, and
    # after_approved is not reachable, with why.
    assert not adapter.capabilities.approvals  # type: ignore[attr-defined]
    assert "after_approved" not in adapter.boundaries
    assert "ctx.asks_for_approval()" in adapter.unreachable["after_approved"]  # type: ignore[attr-defined]


def test_the_tools_its_toolnodes_have_decide_what_applies(user_module: types.ModuleType) -> None:
    """Built at load with every suite tool (``tools["send_email"]`` is there): a suite tool
    its ToolNode lacks is not applicable, never red for its absence."""
    adapter = load_adapter("langgraph:crashmatrix_lg_user:picks")
    tools = adapter.capabilities.tools  # type: ignore[attr-defined]
    assert tools.has("send_email") and tools.has("create_order")
    assert not tools.has("read_file") and tools.missing(["read_file"]) == ["read_file"]
    # A graph that takes every tool it is offered takes a scenario's own (an MCP scenario's
    # create_issue, in no catalogue) in its lives; one with no ToolNode runs its tools its own
    # way: every tool, as before, for both.
    assert load_adapter("langgraph:crashmatrix_lg_user:takes_all").capabilities.tools.has("create_issue")  # type: ignore[attr-defined]
    assert load_adapter("langgraph:crashmatrix_lg_user:good").capabilities.tools.has("read_file")  # type: ignore[attr-defined]


def test_an_error_importing_the_teams_module_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "crashmatrix_lg_broken.py").write_text("import json\nraise RuntimeError('no config')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = "langgraph:crashmatrix_lg_broken:build"
    with pytest.raises(InputError) as caught:
        load_adapter(spec)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"--agent={spec!r}: importing 'crashmatrix_lg_broken' raised RuntimeError at ")
    assert "crashmatrix_lg_broken.py:2: no config" in message


def test_a_factory_that_says_its_graph_asks_gets_the_approval_scenarios_and_after_approved(
    user_module: types.ModuleType,
) -> None:
    adapter = load_adapter("langgraph:crashmatrix_lg_user:asking")
    assert adapter.capabilities.approvals  # type: ignore[attr-defined]
    assert adapter.boundaries == lg.BOUNDARIES
    assert "after_approved" in adapter.boundaries
    assert "after_approved" not in adapter.unreachable  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "payload",
    [
        "Approve the email?",  # a question, no call
        {"tool": "send_email"},  # no tool_call_id
        {"tool": "launch_rocket", "tool_call_id": "call_1"},  # not one of the scenario's tools
        {"tool": "send_email", "tool_call_id": "call_1", "again": "yes"},  # again is a bool
        {"question": "x" * 300},  # long: shortened, still one line
    ],
)
def test_an_interrupt_payload_that_names_no_tool_call_is_one_line(payload: object) -> None:
    spec = "langgraph:team.graph:build"
    with pytest.raises(InputError) as caught:
        lg.approval_request(spec, payload, ("send_email", "read_file"))
    message = str(caught.value)
    assert "\n" not in message and len(message) < 600
    assert message.startswith(f"--agent={spec!r}: the graph interrupted with")
    assert "'tool_call_id'" in message and "send_email, read_file" in message


def test_the_payload_ask_approval_builds_names_the_call() -> None:
    request = lg.approval_request(
        "langgraph:x:y",
        {"tool": "send_email", "tool_call_id": "call_1", "arguments": {}, "again": True},
        ("send_email",),
    )
    assert request == lg.ApprovalRequest("send_email", "call_1", True)


def test_the_chat_model_sends_through_the_intercepted_client() -> None:
    """openai 3.x sends through httpx2 unless handed an httpx client; respx patches httpx
    only. The request must reach the router (the scripted model in a life)."""
    router = respx.MockRouter(assert_all_called=False)
    route = router.post(f"{MODEL_BASE_URL}/chat/completions").mock(
        return_value=httpx.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "crashmatrix-scripted",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "mocked"},
                    }
                ],
            },
        )
    )
    with router, httpx.Client() as http:  # leaving the router resets its call log
        reply = lg._chat_model(MODEL_BASE_URL, http).invoke("hello")
        assert route.call_count == 1
        assert json.loads(route.calls[0].request.content)["messages"] == [
            {"role": "user", "content": "hello"}
        ]
    assert reply.content == "mocked"


# -- real lives ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def launcher() -> Iterator[object]:
    from crashmatrix.harness.lives.injector import LifeLauncher

    # The example is imported by its dotted name from the repository root, in the lives too
    # (the fork server gets this process's sys.path with every life).
    added = str(ROOT) not in sys.path
    if added:
        sys.path.insert(0, str(ROOT))
    yield LifeLauncher("fork", preload=lg.LangGraphAdapter.PRELOAD)
    if added:
        sys.path.remove(str(ROOT))


def _run(
    launcher: object,
    factory: str,
    point: str,
    tmp_path: Path,
    scenario_file: str = "send_email/send_once.yaml",
    deadline: float = 60.0,
) -> object:
    from crashmatrix.harness.front.cases import run_point
    from crashmatrix.harness.input.scenario import load_scenario

    scenario = load_scenario(SUITE / scenario_file)
    return run_point(
        scenario,
        parse_point(point) if point else None,
        launcher,  # type: ignore[arg-type]
        tmp_path / factory,
        agent=f"langgraph:{EXAMPLE}:{factory}",
        deadline=deadline,
    )


@pytest.mark.slow
def test_the_default_toolnode_agent_sends_the_email_again_after_a_crash_past_the_send(
    launcher: object, tmp_path: Path
) -> None:
    result = _run(launcher, "build", "after_side_effect[call_mail]", tmp_path)
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "failed"
    assert [v.invariant for v in verdict.violations] == ["non_idempotent_at_most_once"]
    assert verdict.observed.world["emails"] == 2
    assert result.lives == 2  # type: ignore[attr-defined]
    # The conversation was read back from LangGraph's checkpoint: one tool call, one result.
    log = load_adapter(f"langgraph:{EXAMPLE}:build").read_session(result.case_dir)  # type: ignore[attr-defined]
    roles = [e.message.role for e in log.entries]  # type: ignore[union-attr]
    assert roles == ["user", "assistant", "tool", "assistant"]
    # And the model was asked through the mocks: its request log holds the resumed turn.
    requests = (result.case_dir / "model_requests.jsonl").read_text().splitlines()  # type: ignore[attr-defined]
    assert len(requests) == 2


@pytest.mark.slow
def test_the_ledgered_tools_do_not_send_again(launcher: object, tmp_path: Path) -> None:
    result = _run(launcher, "build_fixed", "after_side_effect[call_mail]", tmp_path)
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "passed", verdict.mismatches or verdict.violations
    assert verdict.observed.world["emails"] == 1
    assert verdict.observed.told["call_mail"] == "uncertain"


def _told(result: object, call_id: str) -> dict[str, object]:
    """The Tool Result the model got for ``call_id``, read back from LangGraph's checkpoint."""
    log = load_adapter(f"langgraph:{EXAMPLE}:build_fixed").read_session(result.case_dir)  # type: ignore[attr-defined]
    (content,) = [
        e.message.content  # type: ignore[union-attr]
        for e in log.entries
        if e.message is not None and e.message.role == "tool" and e.message.tool_call_id == call_id  # type: ignore[union-attr]
    ]
    told = json.loads(content or "{}")
    assert isinstance(told, dict)
    return told


# (scenario, point, call, what the model is told, a word of what it is told, the world)
RECOVERED = [
    # (a) the response was lost: the order is looked up by its key, not created again
    (
        "create_order/keyed_response_lost.yaml",
        "",
        "call_gadget",
        "succeeded",
        "found it by its idempotency key",
        {"orders": 1},
    ),
    # killed before the order: not found by key, sent again with the SAME key, its response
    # lost again (the fault), found by key
    (
        "create_order/keyed_response_lost.yaml",
        "after_running[call_gadget]",
        "call_gadget",
        "succeeded",
        "found it by its idempotency key",
        {"orders": 1},
    ),
    (
        "generic_yaml/refund_payment_response_lost.yaml",
        "",
        "call_refund2",
        "succeeded",
        "found it by its idempotency key",
        {"rows:refunds": 1},
    ),
    # (b) the write landed before the kill: the file is at its planned hash, not written again
    (
        "write_file/write_file_recovery.yaml",
        "after_side_effect[call_recovery_demo]",
        "call_recovery_demo",
        "succeeded",
        "nothing was written again",
        {"files": {"recovery-demo.txt": "recovered"}},
    ),
    # ... a colleague rewrote the file between the lives: neither base nor after, left alone
    (
        "write_file/external_change_conflict.yaml",
        "after_side_effect[call_notes]",
        "call_notes",
        "conflict",
        "changed by someone else",
        {"files": {"notes.txt": "edited by a colleague\n"}},
    ),
    (
        "write_file/external_change_conflict.yaml",
        "after_running[call_notes]",
        "call_notes",
        "conflict",
        "changed by someone else",
        {"files": {"notes.txt": "edited by a colleague\n"}},
    ),
    # (c) a path outside the workspace cannot be checked: not repeated, told conflict
    (
        "write_file/hostile_path.yaml",
        "after_running[call_escape]",
        "call_escape",
        "conflict",
        "outside the workspace",
        {"files": {"escape.txt": None}},
    ),
]


@pytest.mark.parametrize(("scenario", "point", "call", "told", "says", "world"), RECOVERED)
@pytest.mark.slow
def test_the_fixed_tools_recover_by_contract(
    launcher: object,
    tmp_path: Path,
    scenario: str,
    point: str,
    call: str,
    told: str,
    says: str,
    world: dict[str, object],
) -> None:
    """Seed 004 in a team's own tools: reconcile a keyed call by its key, check a whole-file
    write's base and after hashes, and tell the model what was found."""
    result = _run(launcher, "build_fixed", point, tmp_path, scenario)
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "passed", verdict.mismatches or verdict.violations
    assert verdict.observed.told[call] == told
    assert says in str(_told(result, call).get("content"))
    observed = verdict.observed.world
    for key, value in world.items():
        if isinstance(value, dict):
            assert {k: observed[key].get(k) for k in value} == value
        else:
            assert observed[key] == value


@pytest.mark.parametrize(
    ("point", "resumed_from", "asked"),
    [
        # the reply was only in memory: life 2 asks the model again (a new reply)
        ("after_model_reply[call_mail]", "after_model_reply", 3),
        # the reply is a pending write: LangGraph reuses it, the model is not asked again
        ("after_tool_call_pending[call_mail]", "after_tool_call_saved", 2),
    ],
)
@pytest.mark.slow
def test_the_model_reply_boundaries_are_killed_there_and_the_resumed_graph_sends_once(
    launcher: object, tmp_path: Path, point: str, resumed_from: str, asked: int
) -> None:
    result = _run(launcher, "build", point, tmp_path)
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "passed", verdict.mismatches or verdict.violations
    assert verdict.observed.world["emails"] == 1
    assert result.lives == 2  # type: ignore[attr-defined]
    trace = [json.loads(line) for line in (result.case_dir / "trace.jsonl").read_text().splitlines()]  # type: ignore[attr-defined]
    first = [e for e in trace if e["life"] == 1 and e["event"] in ("boundary", "crash")]
    # Killed at that moment: the boundary is life 1's last, the crash right after it.
    assert [first[-2].get("boundary"), first[-1]] == [
        point.partition("[")[0],
        {"life": 1, "event": "crash", "point": point},
    ]
    second = [e["boundary"] for e in trace if e["life"] == 2 and e["event"] == "boundary"]
    assert second[0] == resumed_from
    requests = (result.case_dir / "model_requests.jsonl").read_text().splitlines()  # type: ignore[attr-defined]
    assert len(requests) == asked


# A team's graph whose checkpoint saves are slow (a busy disk, a remote saver): under
# LangGraph's async durability its model node answers while the step's checkpoint is still
# being written, so its reply's pending write would land first.
SLOW_PUT_GRAPH = """
import sqlite3, time
from langgraph.checkpoint.sqlite import SqliteSaver
from examples.langgraph_agent import agent

class SlowSaver(SqliteSaver):
    def put(self, *args, **kwargs):
        time.sleep(0.3)
        return super().put(*args, **kwargs)

def build(ctx):
    graph = agent._graph(ctx, list(ctx.tools))
    graph.checkpointer = SlowSaver(sqlite3.connect(ctx.checkpoint_path, check_same_thread=False))
    return graph
"""


def _slow_put_case(
    point: str, launcher: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[dict[str, Any]]]:
    """send_once.yaml's case at ``point`` on the slow saver's graph, passed; its trace."""
    (tmp_path / "crashmatrix_lg_slow_put.py").write_text(SLOW_PUT_GRAPH)
    monkeypatch.syspath_prepend(str(tmp_path))  # lives get this process's sys.path
    from crashmatrix.harness.front.cases import run_point
    from crashmatrix.harness.input.scenario import load_scenario

    result = run_point(
        load_scenario(SUITE / "send_email/send_once.yaml"),
        parse_point(point),
        launcher,  # type: ignore[arg-type]
        tmp_path / "case",
        agent="langgraph:crashmatrix_lg_slow_put:build",
        deadline=60.0,
    )
    verdict = result.verdict
    assert verdict.status == "passed", verdict.mismatches or verdict.violations
    trace = [json.loads(line) for line in (result.case_dir / "trace.jsonl").read_text().splitlines()]
    return result, trace


@pytest.mark.slow
def test_a_kill_at_the_pending_reply_finds_its_checkpoint_saved_however_slow_the_saver(
    launcher: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``after_tool_call_pending`` is one state: the reply is a pending write of a committed
    checkpoint, so the resumed graph reuses it. Without ``_Saves.wait_committed`` the kill
    finds the step's checkpoint unwritten and the resumed graph asks the model again."""
    result, trace = _slow_put_case("after_tool_call_pending[call_mail]", launcher, tmp_path, monkeypatch)
    second = [e["boundary"] for e in trace if e["life"] == 2 and e["event"] == "boundary"]
    assert second[0] == "after_tool_call_saved", second
    assert len((result.case_dir / "model_requests.jsonl").read_text().splitlines()) == 2


@pytest.mark.slow
def test_a_resumed_graph_passes_its_saved_result_before_it_asks_the_model_however_slow_the_saver(
    launcher: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recovering life's window (the points it passes before it first asks the model: the
    second crashes of ``recovery@P``) is one set in every run. Resumed after a kill at
    before_tool_result, the graph checkpoints the reused result while its model node already
    runs: without ``_Saves.wait_step`` the slow saver commits it after the model request,
    and the window became every point of the rest of the run instead of after_tool_result."""
    _, trace = _slow_put_case("before_tool_result[call_mail]", launcher, tmp_path, monkeypatch)
    second = [
        e.get("boundary", e["event"])
        for e in trace
        if e["life"] == 2 and e["event"] in ("boundary", "model_request")
    ]
    assert second[:2] == ["after_tool_result", "model_request"], second


@pytest.mark.slow
def test_two_calls_of_one_message_are_in_flight_together_and_the_ledger_never_sends_twice(
    launcher: object, tmp_path: Path
) -> None:
    """LangGraph's default: ToolNode runs the calls of one message in parallel threads, so a
    kill on the file write lands with the email's call anywhere (not started, running, done).
    In every one of those states the fixed tools recover the write by its hashes and never
    send the email twice; the scenario's expectations for the email, written for calls run in
    turn (sent once, told succeeded), hold only in the first state."""
    result = _run(
        launcher,
        "build_fixed",
        "after_running[call_minutes]",
        tmp_path,
        "multi_call/two_calls_one_message.yaml",
    )
    verdict = result.verdict  # type: ignore[attr-defined]
    assert not verdict.violations
    assert {m.field for m in verdict.mismatches} <= {"told[call_team]", "world.emails"}
    assert verdict.observed.told["call_minutes"] == "succeeded"
    assert verdict.observed.world["files"]["minutes.txt"] == "decided: ship\n"
    assert verdict.observed.world["emails"] <= 1
    assert result.lives == 2  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_resumed_call_does_not_wait_for_one_its_ledger_answered(launcher: object, tmp_path: Path) -> None:
    """The ledgered tools answer an earlier call from their ledger without running it: the
    next call must not wait for it (a turn-taking lock did, 10 s per life)."""
    result = _run(
        launcher,
        "build_fixed",
        "after_running[call_store]",
        tmp_path,
        "read_only/list_files_and_status.yaml",
        deadline=8.0,
    )
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "passed", verdict.mismatches or verdict.violations
    assert result.lives == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize("point", ["", "after_tool_result[call_0]"])
@pytest.mark.slow
def test_the_ledger_keys_a_reused_call_id_by_its_call_site(
    launcher: object, tmp_path: Path, point: str
) -> None:
    """Turn 2 reuses call_0: keyed by id alone, the ledger replayed turn 1's result (one email
    where the user asked for two), with or without a crash between the turns."""
    result = _run(launcher, "build_fixed", point, tmp_path, "multi_call/reused_call_id_two_turns.yaml")
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "passed", verdict.mismatches or verdict.violations
    assert verdict.observed.world["emails"] == 2
    rows = sqlite3.connect(result.case_dir / "world/workspace/.langgraph/tool-ledger.sqlite").execute(  # type: ignore[attr-defined]
        "SELECT site FROM calls"
    )
    sites = [row[0] for row in rows]
    assert len(sites) == 2 and all(site.endswith("/call_0") for site in sites)


@pytest.mark.slow
def test_a_step_whose_tool_results_were_saved_as_pending_writes_is_resumed(
    launcher: object, tmp_path: Path
) -> None:
    """Killed at before_tool_result, the ToolMessage is a pending write and no checkpoint
    shows it; LangGraph's live snapshot then has an empty ``next``. The restarted life must
    still resume the step (the saved result, no second send) and ask the model."""
    result = _run(launcher, "build", "before_tool_result[call_mail]", tmp_path)
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "passed", verdict.mismatches or verdict.violations
    assert verdict.observed.world["emails"] == 1
    log = load_adapter(f"langgraph:{EXAMPLE}:build").read_session(result.case_dir)  # type: ignore[attr-defined]
    assert [e.message.role for e in log.entries] == ["user", "assistant", "tool", "assistant"]  # type: ignore[union-attr]


def test_a_langgraph_outside_the_range_is_named_with_the_range(
    monkeypatch: pytest.MonkeyPatch, user_module: types.ModuleType
) -> None:
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.0.0")
    with pytest.raises(InputError) as caught:
        load_adapter("langgraph:crashmatrix_lg_user:good")
    message = str(caught.value)
    assert "\n" not in message
    assert "langgraph 2.0.0 is installed" in message and lg.SUPPORTED_TEXT in message


# -- approvals -------------------------------------------------------------------------------


def _approvals(result: object) -> list[dict[str, object]]:
    """What the life answered, one line per answer handed to LangGraph."""
    path = result.case_dir / lg.APPROVALS_FILE  # type: ignore[attr-defined]
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("factory", ["build_approved", "build_fixed_approved"])
@pytest.mark.slow
def test_a_rejected_call_is_never_run(launcher: object, tmp_path: Path, factory: str) -> None:
    """The tool asks (interrupt), the scenario says no, the resumed tool tells the model
    REJECTED and sends nothing."""
    result = _run(launcher, factory, "", tmp_path, "approvals/send_email_rejected.yaml")
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "passed", verdict.mismatches or verdict.violations
    assert verdict.observed.told["call_board"] == "rejected"
    assert verdict.observed.world["emails"] == 0
    assert [(a["tool_call_id"], a["approved"], a["again"]) for a in _approvals(result)] == [
        ("call_board", False, False)
    ]


def _boundaries(result: object, life: int) -> list[str]:
    trace = [json.loads(line) for line in (result.case_dir / "trace.jsonl").read_text().splitlines()]  # type: ignore[attr-defined]
    return [e["boundary"] for e in trace if e["life"] == life and e["event"] == "boundary"]


@pytest.mark.slow
def test_killed_after_the_approval_langgraph_acts_on_the_saved_yes_without_asking_again(
    launcher: object, tmp_path: Path
) -> None:
    """The truth of LangGraph's default way: the answer is a pending write, the resumed tool's
    interrupt() returns it, nobody is asked again. The scenario's second answer (no) never
    reaches it: the order is placed, where it wants the stale approval asked again."""
    result = _run(
        launcher,
        "build_approved",
        "after_approved[call_desks]",
        tmp_path,
        "approvals/reapproval_rejected.yaml",
    )
    verdict = result.verdict  # type: ignore[attr-defined]
    assert result.lives == 2  # type: ignore[attr-defined]
    # Killed there: the answer was saved, the tool had not started its effect.
    assert _boundaries(result, 1)[-1] == "after_approved"
    assert "after_running" not in _boundaries(result, 1)
    assert [a["life"] for a in _approvals(result)] == [1]  # asked once, in life 1
    assert _boundaries(result, 2)[0] == "after_running"  # life 2 ran it, not asking
    assert verdict.status == "failed"
    assert verdict.observed.world["orders"] == 1


@pytest.mark.slow
def test_killed_after_the_approved_effect_langgraph_does_it_again_on_the_same_approval(
    launcher: object, tmp_path: Path
) -> None:
    """The issue's bug class: an approved side effect replayed on durable resume."""
    result = _run(
        launcher,
        "build_approved",
        "after_side_effect[call_desks]",
        tmp_path,
        "approvals/reapproval_rejected.yaml",
    )
    verdict = result.verdict  # type: ignore[attr-defined]
    assert [a["life"] for a in _approvals(result)] == [1]
    assert verdict.observed.world["orders"] == 2
    assert "non_idempotent_at_most_once" in [v.invariant for v in verdict.violations]


@pytest.mark.slow
def test_the_ledgered_tools_ask_a_stale_approval_again(launcher: object, tmp_path: Path) -> None:
    """build_fixed_approved finds the call never started and its approval given by another
    process: it asks again (``again`` in the payload), hears no, places nothing."""
    result = _run(
        launcher,
        "build_fixed_approved",
        "after_approved[call_desks]",
        tmp_path,
        "approvals/reapproval_rejected.yaml",
    )
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "passed", verdict.mismatches or verdict.violations
    assert [(a["life"], a["again"], a["approved"]) for a in _approvals(result)] == [
        (1, False, True),
        (2, True, False),
    ]
    assert verdict.observed.world["orders"] == 0
    assert verdict.observed.told["call_desks"] == "rejected"


# -- the team's configuration ------------------------------------------------------------------


def test_the_graph_runs_with_langgraphs_default_durability_and_no_concurrency_limit(
    user_module: types.ModuleType,
) -> None:
    adapter = load_adapter("langgraph:crashmatrix_lg_user:good")
    assert adapter.driving == lg.Driving("async", None)  # type: ignore[attr-defined]
    assert "max_concurrency" not in adapter.driving.config()  # type: ignore[attr-defined]
    sync = load_adapter("langgraph:crashmatrix_lg_user:good", durability="sync", max_concurrency=1)
    assert sync.driving == lg.Driving("sync", 1)  # type: ignore[attr-defined]
    assert sync.driving.config()["max_concurrency"] == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"durability": "eventually"}, "durability: 'eventually' is not one of sync, async, exit"),
        ({"max_concurrency": 0}, "max_concurrency: 0 is not a whole number of at least 1"),
        ({"colour": "red"}, "takes no option 'colour' (it takes: durability, max_concurrency)"),
    ],
)
def test_a_bad_option_is_one_line_naming_it(
    user_module: types.ModuleType, options: dict[str, object], says: str
) -> None:
    with pytest.raises(InputError) as caught:
        load_adapter("langgraph:crashmatrix_lg_user:good", **options)
    assert "\n" not in str(caught.value) and says in str(caught.value)


class _Saver:
    """A saver whose writes take a while, as a database's do."""

    def __init__(self) -> None:
        self.order: list[str] = []

    def get_tuple(self, config: object) -> None:
        return None

    def put(self, config: object, checkpoint: object, metadata: object, versions: object) -> None:
        self.order.append("put")

    def put_writes(self, config: object, writes: object, task_id: str, task_path: str = "") -> None:
        import time

        time.sleep(0.2)
        self.order.append("put_writes")


def test_a_checkpoint_showing_a_result_waits_for_its_pending_write_and_a_tool_for_its_call() -> None:
    """LangGraph's pool may run a step's checkpoint before a task's pending write, and a tool
    before the checkpoint of its call: the adapter holds the order in which each boundary is
    one state (the pending write, then the checkpoint, then the tool)."""
    import threading

    from langchain_core.messages import AIMessage, ToolMessage

    saver = _Saver()
    fired: list[str] = []
    saves = lg._hook_checkpointer(saver, lambda b, c: fired.append(b), {}, None, "async")
    reply = AIMessage("", id="m1", tool_calls=[{"name": "send_email", "args": {}, "id": "call_1"}])
    result = ToolMessage("sent", id="m2", tool_call_id="call_1")
    writes = threading.Thread(target=saver.put_writes, args=({}, [("messages", reply)], "t1"))
    writes.start()
    import time

    time.sleep(0.05)  # the pending write has begun, not returned

    def tool() -> None:
        saves.wait_saved("m1")  # what hold_tool_nodes does before a ToolNode runs the reply
        fired.append("tool")

    tool_thread = threading.Thread(target=tool)
    tool_thread.start()
    time.sleep(0.05)  # a tool that did not wait would be past its call's checkpoint now
    saver.put({}, {"channel_values": {"messages": [reply]}}, {}, {})
    tool_thread.join()
    writes.join()
    writes = threading.Thread(target=saver.put_writes, args=({}, [("messages", result)], "t2"))
    writes.start()
    time.sleep(0.05)
    saver.put({}, {"channel_values": {"messages": [reply, result]}}, {}, {})
    writes.join()
    assert saver.order == ["put_writes", "put", "put_writes", "put"]
    assert fired == [
        "after_model_reply",
        "after_tool_call_pending",
        "after_tool_call_saved",
        "tool",
        "before_tool_result",
        "after_tool_result",
    ]


def test_a_reply_is_written_only_after_the_checkpoint_it_is_written_against() -> None:
    """The model node may answer while its step's checkpoint is still being written: the
    reply's pending write (after_model_reply, then after_tool_call_pending) waits for that
    checkpoint, so a kill at either finds it saved."""
    import threading
    import time

    from langchain_core.messages import AIMessage

    saver = _Saver()
    fired: list[str] = []
    lg._hook_checkpointer(saver, lambda b, c: fired.append(b), {}, None, "async")
    reply = AIMessage("", id="m1", tool_calls=[{"name": "send_email", "args": {}, "id": "call_1"}])
    config = {"configurable": {"checkpoint_id": "c1"}}
    writes = threading.Thread(target=saver.put_writes, args=(config, [("messages", reply)], "t1"))
    writes.start()
    # Held while c1 is not committed: nothing fires (a write that did not wait fires
    # after_model_reply at once; half a second is room for a thread on a loaded machine).
    deadline = time.monotonic() + 0.5
    while not fired and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fired == []
    saver.put({}, {"id": "c1", "channel_values": {"messages": []}}, {}, {})
    writes.join()
    assert saver.order == ["put", "put_writes"]
    assert fired == ["after_model_reply", "after_tool_call_pending"]


def test_a_toolnode_is_held_until_the_reply_it_runs_is_checkpointed() -> None:
    """Under async durability LangGraph starts the ToolNode while the checkpoint holding its
    reply is still being written: the adapter holds the node (never the framework's code: the
    instance's invoke) until that checkpoint's boundaries passed."""
    import threading
    import time

    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    @tool
    def send_email(to: str) -> str:
        """Send."""
        return "sent"

    g = StateGraph(MessagesState)
    g.add_node("tools", ToolNode([send_email]))
    g.add_edge(START, "tools")
    graph = g.compile()
    (node,) = lg.tool_nodes(graph)
    ran: list[str] = []
    node.invoke = lambda value, config=None, **kwargs: ran.append("ran")
    saves = lg._Saves("async")
    lg.hold_tool_nodes(graph, lambda: saves)
    reply = AIMessage("", id="m1", tool_calls=[{"name": "send_email", "args": {"to": "a"}, "id": "c1"}])
    runner = threading.Thread(target=node.invoke, args=({"messages": [reply]},))
    runner.start()
    time.sleep(0.1)
    assert ran == []  # held: the reply's checkpoint is not committed
    saves.note(seen={"m1"})
    runner.join(5)
    assert ran == ["ran"]


# A graph whose tools resend a call that got no readable answer: a client's blind retry (the
# default of many HTTP clients and retry decorators), put on LangGraph's default graph.
RESENDING = """
import json
from typing import Annotated, Any

from langchain_core.tools import InjectedToolCallId, StructuredTool

from examples.langgraph_agent.agent import _graph


def _resending(ctx: Any, tool: Any) -> Any:
    def call(tool_call_id: Annotated[str, InjectedToolCallId], **arguments: Any) -> str:
        given = {k: v for k, v in arguments.items() if v is not None}
        told = str(ctx.run_tool(tool.name, given, tool_call_id))
        if not json.loads(told).get("ok"):
            told = str(ctx.run_tool(tool.name, given, tool_call_id))  # no answer taken for "not sent"
        return told

    return StructuredTool.from_function(
        func=call, name=tool.name, description=tool.description, args_schema=tool.args_schema
    )


def build(ctx: Any) -> Any:
    return _graph(ctx, [_resending(ctx, t) for t in ctx.tools])
"""


@pytest.mark.slow
def test_the_tool_side_columns_act_on_the_mock_tools_a_kind_1_adapter_wraps(
    launcher: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--agent=langgraph:...``: its LangChain tools run the mock tools, whose tool side the
    columns fail (issue 32). The mail backend dies after the send: the default graph tells
    the model the truth (uncertain) and sends once; a graph whose tools resend a call that got
    no answer sends twice, red by the invariant (not by the scenario's expectations)."""
    from crashmatrix.harness.front.cases import run_tool_fault
    from crashmatrix.harness.input.scenario import load_scenario

    (tmp_path / "crashmatrix_lg_resending.py").write_text(RESENDING, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))  # the lives get this process's sys.path
    scenario = load_scenario(SUITE / "send_email" / "send_once.yaml")
    point = parse_point("tool_server_died[call_mail]")
    told = {}
    for factory in (f"{EXAMPLE}:build", "crashmatrix_lg_resending:build"):
        run = functools.partial(run_tool_fault, agent=f"langgraph:{factory}", deadline=60.0)
        result = run(scenario, point, launcher, tmp_path / factory)
        verdict = result.verdict
        told[factory] = (
            verdict.status,
            verdict.observed.world["emails"],
            sorted({v.invariant for v in verdict.violations}),
        )
    assert told == {
        f"{EXAMPLE}:build": ("passed", 1, []),
        "crashmatrix_lg_resending:build": ("failed", 2, ["non_idempotent_at_most_once"]),
    }


@pytest.mark.slow  # the inner run starts its fork server
def test_pytest_collects_a_built_in_scenario_with_the_langgraph_adapter_as_agent(
    pytester: pytest.Pytester,
) -> None:
    # Every scenario failed to collect: "'str' object has no attribute 'kind'" (its --agent
    # text was read as an adapter file's spec by the double-resume plan).
    collected_and_clean(pytester, "langgraph:examples.langgraph_agent.agent:build")
