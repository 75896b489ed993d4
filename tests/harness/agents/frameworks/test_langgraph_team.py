"""A LangGraph agent declared in an adapter YAML (``framework: langgraph``), tested as it is:
its own ``@tool`` functions writing its own outbox and orders table, its own ``ChatOpenAI()``
(from the environment), LangGraph's default durability, the checkpointer crashmatrix hands
it. The docs' agent (``examples/langgraph_team/support_graph.py``) sends an email twice and
places a second order after a crash past the effect, counted in ITS outbox and table; the
fixed one (``fixed.py``) does neither; the suite tools it lacks are not applicable; a model
client that escapes, a graph on another checkpointer, or a module that fails to import is one
line at load."""

from __future__ import annotations

import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from crashmatrix.harness.agents.frameworks import langgraph as lg
from crashmatrix.harness.agents.loading import load_adapter
from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.errors import InputError

from ....launchers import warm_launcher
from ....pytest_runs import run_inprocess

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[4]
SUITE = ROOT / "scenarios"
TEAM = ROOT / "examples" / "langgraph_team"


def _yaml(tmp_path: Path, factory_source: str, extra: str = "") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cm_lg_team_factory.py").write_text(factory_source, encoding="utf-8")
    path = tmp_path / "adapter.yaml"
    path.write_text(
        "name: t\nframework: langgraph\nfactory: cm_lg_team_factory:build\n" + extra, encoding="utf-8"
    )
    return path


@pytest.fixture
def clean_modules() -> Iterator[None]:
    yield
    for name in [n for n in sys.modules if n.startswith("cm_lg_team_")]:
        del sys.modules[name]


GRAPH = """
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

@tool
def send_email(to: str, subject: str, body: str) -> str:
    '''Send an email.'''
    return "sent"

def graph(model, checkpointer):
    model = model.bind_tools([send_email])
    g = StateGraph(MessagesState)
    g.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    g.add_node("tools", ToolNode([send_email]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)
"""
ESCAPING = (
    GRAPH
    + """
def build(ctx):
    client = ChatOpenAI(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    return graph(client, ctx.checkpointer)
"""
)
OWN_SAVER = (
    GRAPH
    + """
from langgraph.checkpoint.memory import InMemorySaver

def build(ctx):
    return graph(ChatOpenAI(model="m"), InMemorySaver())
"""
)
OWN_TOOLS = (
    GRAPH
    + """
def build(ctx):
    return graph(ChatOpenAI(model="m"), ctx.checkpointer)
"""
)
BROKEN = "import json\nCONFIG = json.loads('{')\n"
MOCK_TOOLS = """
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

def build(ctx):
    model = ChatOpenAI(model="m").bind_tools(list(ctx.tools))
    g = StateGraph(MessagesState)
    g.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    g.add_node("tools", ToolNode(list(ctx.tools)))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=ctx.checkpointer)
"""


@pytest.mark.parametrize(
    ("source", "says"),
    [
        (ESCAPING, "the agent's model client did not reach crashmatrix's model at http://127.0.0.1:"),
        (OWN_SAVER, "factory: the graph's checkpointer is InMemorySaver, not the one crashmatrix handed it"),
        (BROKEN, "importing 'cm_lg_team_factory' raised JSONDecodeError at "),
    ],
)
def test_an_agent_that_cannot_be_tested_is_one_line_at_load(
    tmp_path: Path, clean_modules: None, source: str, says: str
) -> None:
    with pytest.raises(InputError) as caught:
        load_adapter(str(_yaml(tmp_path, source)))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / 'adapter.yaml'}: ")
    assert says in message


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ("{durability: eventually}", "options: durability: 'eventually' is not one of sync, async, exit"),
        ("{store: redis}", "options.store: 'redis' is not one of sqlite, postgres"),
    ],
)
def test_a_bad_option_is_one_line(tmp_path: Path, clean_modules: None, options: str, says: str) -> None:
    with pytest.raises(InputError, match=says.replace(".", r"\.").replace("(", r"\(")):
        load_adapter(str(_yaml(tmp_path, OWN_TOOLS, f"options: {options}\n")))


def test_without_a_catalogue_the_tools_its_toolnode_has_decide_what_applies(
    tmp_path: Path, clean_modules: None
) -> None:
    adapter = load_adapter(str(_yaml(tmp_path, OWN_TOOLS)))
    tools = adapter.capabilities.tools  # type: ignore[attr-defined]
    assert tools.has("send_email") and not tools.has("create_order") and not tools.has("read_file")
    assert adapter.capabilities.approvals is False  # type: ignore[attr-defined]
    # LangGraph's own seams, the tool's two brackets among them; no steps inside its tools.
    assert "after_tool_call_pending" in adapter.boundaries and "after_side_effect" in adapter.boundaries
    assert "during_side_effect" in adapter.unreachable  # type: ignore[attr-defined]
    # The load check imported the team's module in a scratch directory and dropped it.
    assert "cm_lg_team_factory" not in sys.modules


ASKING = (
    GRAPH
    + """
def build(ctx):
    ctx.asks_for_approval()  # its tools call interrupt() before they act
    return graph(ChatOpenAI(model="m"), ctx.checkpointer)
"""
)


def test_after_approved_is_reached_by_a_graph_that_asks_and_not_reachable_with_why_by_one_that_does_not(
    tmp_path: Path, clean_modules: None
) -> None:
    quiet = load_adapter(str(_yaml(tmp_path / "quiet", OWN_TOOLS)))
    assert "after_approved" not in quiet.boundaries
    assert quiet.unreachable["after_approved"] == lg.WHY_NO_APPROVAL  # type: ignore[attr-defined]
    for name in [n for n in sys.modules if n.startswith("cm_lg_team_")]:
        del sys.modules[name]
    asking = load_adapter(str(_yaml(tmp_path / "asking", ASKING)))
    assert asking.capabilities.approvals is True  # type: ignore[attr-defined]
    assert "after_approved" in asking.boundaries
    assert "after_approved" not in asking.unreachable  # type: ignore[attr-defined]


def test_the_team_example_has_the_suite_tools_its_catalogue_names() -> None:
    adapter = load_adapter(str(TEAM / "adapter.yaml"))
    tools = adapter.capabilities.tools  # type: ignore[attr-defined]
    assert tools.has("send_email") and tools.has("create_order") and not tools.has("read_file")
    assert adapter.dialect.results.name == "adapter"  # its results: rules, not crashmatrix's
    assert "support_graph" not in sys.modules and "fixed" not in sys.modules


def test_the_checkpoint_is_read_back_from_the_case_workspace(tmp_path: Path) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import START, MessagesState, StateGraph

    workspace = tmp_path / "world" / "workspace"
    path = lg.checkpoint_file(workspace)
    path.parent.mkdir(parents=True)
    assert lg.read_records(workspace) == []  # nothing saved yet
    call = {"name": "send_email", "args": {"to": "a"}, "id": "c1"}
    messages = [HumanMessage("hi"), AIMessage("", tool_calls=[call]), ToolMessage("sent", tool_call_id="c1")]
    g = StateGraph(MessagesState)
    g.add_node("n", lambda state: {"messages": messages})
    g.add_edge(START, "n")
    with sqlite3.connect(path, check_same_thread=False) as conn:
        g.compile(checkpointer=SqliteSaver(conn)).invoke({"messages": []}, lg.Driving().config())
    records = lg.read_records(workspace)
    assert [r["message"]["role"] for r in records] == ["user", "assistant", "tool"]
    assert records[1]["message"]["tool_calls"][0]["id"] == "c1"


def test_a_power_loss_on_postgres_is_not_reachable_with_why() -> None:
    adapter = load_adapter(str(TEAM / "adapter.yaml"))
    why = adapter.power_session(Path("/x"))  # type: ignore[attr-defined]
    assert isinstance(why, str) and "PostgreSQL" in why and "own crash recovery" in why


# -- real lives ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def launcher() -> Iterator[object]:
    # The server ``pytest --agent`` starts for the team's agent (the matrix run below shares it:
    # one server, not two), that agent loaded warm in it; a bare langgraph one made every life
    # import langchain_openai and openai and load the adapter again.
    yield warm_launcher(TEAM / "adapter.yaml")


def _run(launcher: object, adapter: str, scenario_file: str, point: str, tmp_path: Path) -> Any:
    from crashmatrix.harness.front.cases import run_point
    from crashmatrix.harness.input.scenario import load_scenario

    return run_point(
        load_scenario(SUITE / scenario_file),
        None if point == "clean" else parse_point(point),
        launcher,  # type: ignore[arg-type]
        tmp_path / adapter,
        agent=str(TEAM / f"{adapter}.yaml"),
        deadline=60.0,
    )


def _workspace(result: Any) -> Path:
    return Path(result.case_dir) / "world" / "workspace"


def _emails(result: Any) -> int:
    outbox = _workspace(result) / "outbox.jsonl"
    return len(outbox.read_text().splitlines()) if outbox.exists() else 0


def _orders(result: Any) -> int:
    path = _workspace(result) / "orders.db"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM orders").fetchone()[0])


@pytest.mark.slow
def test_the_docs_agent_sends_twice_into_its_own_outbox_after_a_crash_past_the_send(
    launcher: object, tmp_path: Path
) -> None:
    result = _run(launcher, "adapter", "send_email/send_once.yaml", "after_side_effect[call_mail]", tmp_path)
    verdict = result.verdict
    assert verdict.status == "failed"
    assert "non_idempotent_at_most_once" in [v.invariant for v in verdict.violations]
    assert verdict.observed.world["emails"] == 2
    assert _emails(result) == 2  # counted in the team's own outbox, written by its own send_email
    # Its conversation, read back from the checkpoint crashmatrix handed its graph.
    log = lg.read_records(_workspace(result))
    assert [r["message"]["role"] for r in log] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.slow
def test_the_docs_agent_places_a_second_order_in_its_own_table(launcher: object, tmp_path: Path) -> None:
    result = _run(
        launcher, "adapter", "create_order/keyed_once.yaml", "after_side_effect[call_order]", tmp_path
    )
    assert result.verdict.status == "failed"
    assert _orders(result) == 2


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario_file", "point", "emails", "orders"),
    [
        ("send_email/send_once.yaml", "clean", 1, 0),
        ("send_email/send_once.yaml", "after_running[call_mail]", 0, 0),
        ("send_email/send_once.yaml", "after_side_effect[call_mail]", 1, 0),
        ("create_order/keyed_once.yaml", "after_running[call_order]", 0, 1),
        ("create_order/keyed_once.yaml", "after_side_effect[call_order]", 0, 1),
    ],
)
def test_the_fixed_agent_recovers_by_its_tools_contracts(
    launcher: object, tmp_path: Path, scenario_file: str, point: str, emails: int, orders: int
) -> None:
    result = _run(launcher, "adapter_fixed", scenario_file, point, tmp_path)
    verdict = result.verdict
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems
    assert (_emails(result), _orders(result)) == (emails, orders)


@pytest.mark.slow
def test_the_suite_tools_it_lacks_are_not_applicable_never_red(pytester: pytest.Pytester) -> None:
    shutil.copytree(SUITE / "read_only", pytester.path / "scenarios")
    # No doctor: the doctor finds nothing blind on this agent (the doctor test below), and a
    # case not applicable is skipped before any check could be blind. Its server is the
    # module's launcher's (the same agent, preloaded and warm alike): no second one.
    agent = f"--agent={TEAM / 'adapter.yaml'}"
    result = run_inprocess(pytester, "scenarios", agent, "--no-doctor", "-p", "no:cacheprovider", "-rs")
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) >= 1 and not outcomes.get("failed") and not outcomes.get("passed")
    result.stdout.fnmatch_lines(["*not applicable: the agent has no read_file*"])


@pytest.mark.slow
def test_with_tools_harness_the_factory_gets_crashmatrixs_mock_tools(
    launcher: object, tmp_path: Path, clean_modules: None
) -> None:
    """``tools: harness``: ctx.tools are the scenario's tools run by the mock tools in the
    case's world (counted there), every suite tool applies, and a crash past the send is
    LangGraph's duplicate again, now in crashmatrix's world."""
    from crashmatrix.harness.front.cases import run_point
    from crashmatrix.harness.input.scenario import load_scenario

    adapter = _yaml(tmp_path, MOCK_TOOLS, "tools: harness\noptions: {durability: sync, max_concurrency: 1}\n")
    assert load_adapter(str(adapter)).capabilities.tools.has("read_file")  # type: ignore[attr-defined]
    scenario = load_scenario(SUITE / "send_email/send_once.yaml")
    clean = run_point(scenario, None, launcher, tmp_path / "clean", agent=str(adapter), deadline=60.0)  # type: ignore[arg-type]
    assert clean.verdict.status == "passed", clean.verdict.mismatches or clean.verdict.violations
    crashed = run_point(
        scenario,
        parse_point("after_side_effect[call_mail]"),
        launcher,
        tmp_path / "crash",
        agent=str(adapter),
        deadline=60.0,  # type: ignore[arg-type]
    )
    assert crashed.verdict.status == "failed"
    assert crashed.verdict.observed.world["emails"] == 2
    # The tool-side columns act on those mock tools too (issue 32): the mail backend dies after
    # the send, ToolNode hands the model the uncertain answer and sends nothing again.
    from crashmatrix.harness.front.cases import run_tool_fault

    died = run_tool_fault(
        scenario,
        parse_point("tool_server_died[call_mail]"),
        launcher,  # type: ignore[arg-type]
        tmp_path / "tool-side",
        agent=str(adapter),
        deadline=60.0,
    )
    assert died.verdict.status == "passed", died.verdict.violations or died.verdict.problems
    assert died.verdict.observed.world["emails"] == 1
    assert any(e.get("event") == "fault" and e.get("acted") for e in died.observation.trace)  # type: ignore[union-attr]


# -- PostgresSaver on a real PostgreSQL ------------------------------------------------------


@pytest.fixture(scope="module")
def pg_launcher(postgres_url: str) -> Iterator[object]:
    """A fork server of its own, started after the server: it and every life inherit its URL
    (the one of ``launcher``, started before, would not)."""
    from crashmatrix.harness.lives.injector import LifeLauncher

    yield LifeLauncher("fork", preload=(*lg.FRAMEWORK.preload, "langgraph.checkpoint.postgres"))


@pytest.mark.slow
def test_on_postgres_the_docs_agent_sends_twice_and_the_fixed_one_once(
    pg_launcher: object, tmp_path: Path
) -> None:
    """The same graphs, compiled with the PostgresSaver crashmatrix hands them (the case's own
    database): LangGraph's resume re-runs the ToolNode after a crash past the send, the
    ledgered tools do not send again; the conversation is read back from PostgreSQL."""
    default = _run(
        pg_launcher, "adapter_postgres", "send_email/send_once.yaml", "after_side_effect[call_mail]", tmp_path
    )
    assert default.verdict.status == "failed"
    assert "non_idempotent_at_most_once" in [v.invariant for v in default.verdict.violations]
    assert _emails(default) == 2
    assert (Path(default.case_dir) / "postgres.json").exists()
    assert not lg.checkpoint_file(_workspace(default)).exists()  # nothing of it in SQLite
    log = lg.read_records(_workspace(default))
    assert [r["message"]["role"] for r in log] == ["user", "assistant", "tool", "assistant"]
    fixed = _run(
        pg_launcher,
        "adapter_fixed_postgres",
        "send_email/send_once.yaml",
        "after_side_effect[call_mail]",
        tmp_path,
    )
    assert fixed.verdict.status == "passed", fixed.verdict.mismatches or fixed.verdict.violations
    assert _emails(fixed) == 1
    order = _run(
        pg_launcher,
        "adapter_fixed_postgres",
        "create_order/keyed_once.yaml",
        "after_side_effect[call_order]",
        tmp_path,
    )
    assert order.verdict.status == "passed", order.verdict.mismatches or order.verdict.violations
    assert _orders(order) == 1


@pytest.mark.slow
def test_the_doctors_faults_land_in_the_team_graphs_own_checkpoint(launcher: object, tmp_path: Path) -> None:
    """``crashmatrix doctor`` on the YAML-declared agent plants its faults in the checkpoint
    crashmatrix handed the graph (the messages read_records reads): no check is blind."""
    from crashmatrix.harness.front.doctor import run_doctor

    coverage = run_doctor(str(TEAM / "adapter.yaml"), launcher=launcher, work=tmp_path)  # type: ignore[arg-type]
    states = {result.check: result.state for result in coverage.results}
    assert coverage.blind == (), coverage.table()
    assert states["one_tool_result_per_call"] == "fires", coverage.table()
    assert states["turn_ends_with_final"] == "fires", coverage.table()


@pytest.mark.slow
def test_killed_before_its_tool_ran_the_docs_agent_sending_once_is_no_red(
    launcher: object, tmp_path: Path
) -> None:
    """Without a ledger, after_running is the state of after_tool_call_saved (nothing durable
    between them): sending the email once on resume is a true outcome there, as is telling
    uncertain and not sending; at after_side_effect the same resend is the double email."""
    result = _run(launcher, "adapter", "send_email/send_once.yaml", "after_running[call_mail]", tmp_path)
    verdict = result.verdict
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems
    assert _emails(result) == 1 and verdict.indeterminate
    assert any("after_tool_call_saved's expectations hold" in note for note in verdict.notes), verdict.notes
