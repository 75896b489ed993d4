"""An Agents SDK agent declared in an adapter YAML (``framework: openai-agents``), tested as it
is: its own FunctionTools writing its own outbox and orders table, its own model client (the
SDK's default, from the environment), its own SQLiteSession. The SDK docs' agent
(``examples/agents_sdk_team/support_agent.py``) sends an email twice after a crash past the
send, counted in ITS outbox; the fixed one (``fixed.py``) does not; the suite tools it lacks
are not applicable; a model client that escapes is one line at load."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from crashmatrix.harness.agents.frameworks import openai_agents as oa
from crashmatrix.harness.agents.loading import load_adapter
from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.errors import InputError

from ....launchers import warm_launcher

ROOT = Path(__file__).resolve().parents[4]
SUITE = ROOT / "scenarios"
TEAM = ROOT / "examples" / "agents_sdk_team"


def _yaml(tmp_path: Path, factory_source: str, extra: str = "") -> Path:
    (tmp_path / "cm_team_factory.py").write_text(factory_source, encoding="utf-8")
    path = tmp_path / "adapter.yaml"
    path.write_text(
        "name: t\nframework: openai-agents\nfactory: cm_team_factory:build\n" + extra, encoding="utf-8"
    )
    return path


@pytest.fixture
def clean_modules() -> Iterator[None]:
    yield
    for name in [n for n in sys.modules if n.startswith("cm_team_")]:
        del sys.modules[name]


ESCAPING = """
from agents import Agent, OpenAIChatCompletionsModel, SQLiteSession
from openai import AsyncOpenAI

def build(ctx):
    client = AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    agent = Agent(name="a", model=OpenAIChatCompletionsModel(model="m", openai_client=client))
    return agent, SQLiteSession("s", "c.db")
"""

RESPONSES = """
from agents import Agent, OpenAIResponsesModel, SQLiteSession
from openai import AsyncOpenAI

def build(ctx):
    agent = Agent(name="a", model=OpenAIResponsesModel(model="m", openai_client=AsyncOpenAI(max_retries=0)))
    return agent, SQLiteSession("s", "c.db")
"""

IN_MEMORY = """
from agents import Agent, SQLiteSession

def build(ctx):
    return Agent(name="a", model="gpt-4o-mini"), SQLiteSession("s")
"""


@pytest.mark.parametrize(
    ("source", "says"),
    [
        (ESCAPING, "the agent's model client did not reach crashmatrix's model at http://127.0.0.1:"),
        (RESPONSES, "but asked for no chat completion (the Responses API?)"),
        (IN_MEMORY, "factory: the SQLiteSession is in memory"),
        ("import no_such_team_library\n", "importing 'cm_team_factory' failed at "),
        ("def other(ctx):\n    pass\n", "factory: cm_team_factory has no function 'build'"),
    ],
)
def test_a_model_client_or_session_that_cannot_be_tested_is_one_line_at_load(
    tmp_path: Path, clean_modules: None, source: str, says: str
) -> None:
    with pytest.raises(InputError) as caught:
        load_adapter(str(_yaml(tmp_path, source)))
    assert "\n" not in str(caught.value)
    assert says in str(caught.value)


def test_the_team_agents_own_tools_decide_what_applies(clean_modules: None) -> None:
    adapter = load_adapter(str(TEAM / "adapter.yaml"))
    tools = adapter.capabilities.tools  # type: ignore[attr-defined]
    assert tools.has("send_email") and tools.has("create_order") and not tools.has("read_file")
    assert adapter.capabilities.approvals is False  # type: ignore[attr-defined]  # its tools ask nothing
    # ... so the moments of an approval are not reachable, with why (not "not reached").
    assert "after_approved" not in adapter.boundaries
    assert adapter.unreachable["after_tool_call_saved"] == oa.WHY_NO_APPROVAL  # type: ignore[attr-defined]
    assert adapter.servers == ()  # type: ignore[attr-defined]  # its store is a file
    assert adapter.dialect.results.name == "adapter"  # its results: rules, not crashmatrix's
    # The load check imported the team's modules in a scratch directory and dropped them:
    # each life imports them in its own workspace.
    assert "support_agent" not in sys.modules


def test_the_session_is_read_from_where_the_factory_put_it(tmp_path: Path) -> None:
    from agents import SQLiteSession

    workspace = tmp_path / "world" / "workspace"
    workspace.mkdir(parents=True)
    session = SQLiteSession("customer-42", str(workspace / "conversations.db"))
    call = {"type": "function_call", "call_id": "c1", "name": "send_email", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "Email sent."}
    asyncio.run(session.add_items([{"role": "user", "content": "hi"}, call, output]))  # type: ignore[list-item]
    assert oa.read_records(workspace) == []  # no life said where its session is yet
    oa._write_store(tmp_path, oa._store_of("adapter.yaml", session, workspace))
    assert json.loads((tmp_path / oa.STORE_NAME).read_text())["path"] == "conversations.db"  # relative
    roles = [record["message"]["role"] for record in oa.read_records(workspace)]
    assert roles == ["user", "assistant", "tool"]


def test_a_steps_calls_stay_concurrent_under_the_brackets() -> None:
    """The SDK runs a step's calls with asyncio; the brackets do not serialise them: both
    tools start before either returns."""
    from agents import Agent, function_tool

    events: list[str] = []

    @function_tool
    async def one() -> str:
        """One."""
        events.append("one acts")
        await asyncio.sleep(0)
        return "1"

    @function_tool
    async def two() -> str:
        """Two."""
        events.append("two acts")
        await asyncio.sleep(0)
        return "2"

    agent = Agent(name="a", tools=[one, two])
    names = oa._bracket_tools(
        agent, lambda c: events.append(f"before {c}"), lambda c: events.append(f"after {c}")
    )
    assert names == ["one", "two"]

    async def step() -> None:
        from agents.tool_context import ToolContext

        def context(call_id: str, name: str) -> Any:
            return ToolContext(context=None, tool_name=name, tool_call_id=call_id, tool_arguments="{}")

        await asyncio.gather(
            one.on_invoke_tool(context("c1", "one"), "{}"), two.on_invoke_tool(context("c2", "two"), "{}")
        )

    asyncio.run(step())
    assert events.index("two acts") < events.index("after c1")
    assert events[:2] == ["before c1", "one acts"] and events[-1] == "after c2"


# -- real lives ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def launcher() -> Iterator[object]:
    # examples.openai_agents_agent.own_client is imported by its dotted name, in the lives too.
    added = str(ROOT) not in sys.path
    if added:
        sys.path.insert(0, str(ROOT))
    # The server ``pytest --agent`` would start, both team agents loaded warm in it: a bare
    # agents one made every life import openai and load the adapter again.
    yield warm_launcher(TEAM / "adapter.yaml", TEAM / "adapter_fixed.yaml")
    if added:
        sys.path.remove(str(ROOT))


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


@pytest.mark.slow
def test_the_sdk_docs_agent_sends_twice_into_its_own_outbox_after_a_crash_past_the_send(
    launcher: object, tmp_path: Path
) -> None:
    result = _run(launcher, "adapter", "send_email/send_once.yaml", "after_side_effect[call_mail]", tmp_path)
    verdict = result.verdict
    assert verdict.status == "failed"
    assert "non_idempotent_at_most_once" in [v.invariant for v in verdict.violations]
    assert verdict.observed.world["emails"] == 2
    # Counted in the team's own outbox, written by its own send_email.
    assert len((_workspace(result) / "outbox.jsonl").read_text().splitlines()) == 2
    # Its own session, where its own code put it, read back as the conversation.
    log = oa.read_records(_workspace(result))
    assert [r["message"]["role"] for r in log] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.slow
def test_the_sdk_docs_agent_places_a_second_order_in_its_own_table(launcher: object, tmp_path: Path) -> None:
    result = _run(
        launcher, "adapter", "create_order/keyed_once.yaml", "after_side_effect[call_order]", tmp_path
    )
    assert result.verdict.status == "failed"
    with sqlite3.connect(_workspace(result) / "orders.db") as db:
        assert db.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 2


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario_file", "point", "emails", "orders"),
    [
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
    outbox = _workspace(result) / "outbox.jsonl"
    assert (len(outbox.read_text().splitlines()) if outbox.exists() else 0) == emails
    if orders:
        with sqlite3.connect(_workspace(result) / "orders.db") as db:
            assert db.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == orders


@pytest.mark.slow
def test_a_second_turns_effect_belongs_to_the_second_turns_call(launcher: object, tmp_path: Path) -> None:
    """The SDK saves a step's call only after its tool ran: while it runs, the call is in
    what the adapter reads, so the second turn's order is its own call's (without it, both
    orders were the first call's: two effects of one call, none of the other)."""
    result = _run(launcher, "adapter", "create_order/two_orders_two_turns.yaml", "clean", tmp_path)
    verdict = result.verdict
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems
    assert verdict.observed.world["orders"] == 2


# -- the conversation in PostgreSQL (SQLAlchemySession), a real server ------------------------


@pytest.fixture
def pg_launcher(postgres_url: str) -> Iterator[object]:
    """A fork server started after the server: its lives inherit CRASHMATRIX_POSTGRES_URL (the
    module's launcher may predate it), as the plugin starts the server before any."""
    from crashmatrix.harness.lives.injector import LifeLauncher

    pytest.importorskip("sqlalchemy")
    # Its own preload list: fork servers are shared per list, and the module's predates the
    # server.
    yield LifeLauncher("fork", preload=("agents", oa.__name__, "sqlalchemy"))


@pytest.mark.slow
def test_on_postgres_the_sdk_docs_agent_sends_twice_and_its_session_is_read_from_the_server(
    pg_launcher: object, tmp_path: Path
) -> None:
    launcher = pg_launcher
    adapter = load_adapter(str(TEAM / "adapter_postgres.yaml"))
    assert adapter.servers == ("postgres",)  # type: ignore[attr-defined]  # started before anything forks
    # A power loss cuts files back to their last fsync: a server's database is not one.
    assert adapter.power_session(tmp_path) == oa.WHY_NO_POWER  # type: ignore[attr-defined]
    point = "after_side_effect[call_mail]"
    result = _run(launcher, "adapter_postgres", "send_email/send_once.yaml", point, tmp_path)
    assert result.verdict.status == "failed"
    assert result.verdict.observed.world["emails"] == 2
    case_dir = Path(result.case_dir)
    assert json.loads((case_dir / oa.STORE_NAME).read_text())["kind"] == "postgres"
    assert not list(_workspace(result).glob("*.db*"))  # nothing of the conversation on disk
    log = oa.read_records(_workspace(result))
    assert [r["message"]["role"] for r in log] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario_file", "point"),
    [
        ("create_order/keyed_once.yaml", "after_side_effect[call_order]"),
        ("send_email/send_once.yaml", "clean"),
    ],
)
def test_on_postgres_the_fixed_agent_stays_green(
    pg_launcher: object, tmp_path: Path, scenario_file: str, point: str
) -> None:
    result = _run(pg_launcher, "adapter_fixed_postgres", scenario_file, point, tmp_path)
    verdict = result.verdict
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems


# -- the old way (--agent=openai-agents:module:factory) with a model of the agent's own --------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("point", "emails"), [("after_model_reply[call_mail]", 1), ("after_side_effect[call_mail]", 2)]
)
def test_a_model_name_on_the_sdks_default_client_is_served_and_crashed_at_its_reply(
    launcher: object, tmp_path: Path, point: str, emails: int
) -> None:
    """``Agent(model="gpt-4o-mini")``: the SDK's default client, from OPENAI_BASE_URL, asks
    the scripted model on loopback; the reply's edge is after_model_reply there."""
    from crashmatrix.harness.front.cases import run_point
    from crashmatrix.harness.input.scenario import load_scenario

    result = run_point(
        load_scenario(SUITE / "send_email" / "send_once.yaml"),
        parse_point(point),
        launcher,  # type: ignore[arg-type]
        tmp_path,
        agent="openai-agents:examples.openai_agents_agent.own_client:build",
        deadline=60.0,
    )
    verdict = result.verdict
    assert verdict.observed.world["emails"] == emails
    trace = [json.loads(line) for line in (Path(result.case_dir) / "trace.jsonl").read_text().splitlines()]
    crash = [event for event in trace if event.get("event") == "crash"]
    assert [event["point"] for event in crash] == [point]
    assert sum(1 for event in trace if event.get("event") == "model_request") >= 3


HARNESS_TOOLS = """
from agents import Agent, SQLiteSession


def build(ctx):
    return Agent(name="a", model="gpt-4o-mini", tools=list(ctx.tools)), SQLiteSession("s", "chat.db")
"""


@pytest.mark.slow
def test_tools_harness_hands_the_factory_crashmatrixs_mock_tools(
    launcher: object, tmp_path: Path, clean_modules: None
) -> None:
    """``tools: harness`` in a framework YAML: ``ctx.tools`` are the suite's tools run by the
    mock tools (every one: nothing is n.a. for a missing tool), bracketed like the team's."""
    from crashmatrix.harness.front.cases import run_point
    from crashmatrix.harness.input.scenario import load_scenario

    (tmp_path / "cm_team_harness.py").write_text(HARNESS_TOOLS, encoding="utf-8")
    path = tmp_path / "adapter.yaml"
    text = "name: t\nframework: openai-agents\nfactory: cm_team_harness:build\ntools: harness\n"
    path.write_text(text, encoding="utf-8")
    adapter = load_adapter(str(path))
    assert adapter.capabilities.tools.has("read_file")  # type: ignore[attr-defined]
    result = run_point(
        load_scenario(SUITE / "send_email" / "send_once.yaml"),
        parse_point("after_side_effect[call_mail]"),
        launcher,  # type: ignore[arg-type]
        tmp_path / "case",
        agent=str(path),
        deadline=60.0,
    )
    assert result.verdict.status == "failed"
    assert result.verdict.observed.world["emails"] == 2  # the mock mail service's world
