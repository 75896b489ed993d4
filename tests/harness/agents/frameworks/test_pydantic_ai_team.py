"""A PydanticAI agent declared in an adapter YAML (``framework: pydantic-ai``), tested as it
is: its own tools writing its own outbox and orders table, its own ``OpenAIChatModel`` (the
default provider, from the environment), its own message store (each run's new messages one
SQLite row). The docs' agent (``examples/pydantic_ai_team/support_agent.py``) sends an email
twice after a crash past the send, counted in ITS outbox; the fixed one (``fixed.py``) does
not; an agent that asks (``requires_approval=True``) is asked again after a restart; what
cannot be tested is one line at load."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from crashmatrix.harness.agents.frameworks import pydantic_ai as pai
from crashmatrix.harness.agents.loading import load_adapter
from crashmatrix.harness.agents.session_records import CannotPlant
from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.errors import InputError

from ....launchers import warm_launcher

ROOT = Path(__file__).resolve().parents[4]
SUITE = ROOT / "scenarios"
TEAM = ROOT / "examples" / "pydantic_ai_team"

STORE = """
import sqlite3
from pydantic_ai.messages import ModelMessagesTypeAdapter


class Store:
    def __init__(self, path):
        self.path = path
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, message_list TEXT)")

    def add_messages(self, messages):
        with sqlite3.connect(self.path) as db:
            db.execute("INSERT INTO messages (message_list) VALUES (?)", (messages.decode(),))

    def get_messages(self):
        with sqlite3.connect(self.path) as db:
            rows = db.execute("SELECT message_list FROM messages ORDER BY id").fetchall()
        return [m for row in rows for m in ModelMessagesTypeAdapter.validate_json(row[0])]
"""


def _yaml(tmp_path: Path, factory_source: str, extra: str = "") -> Path:
    (tmp_path / "cm_pai_factory.py").write_text(STORE + factory_source, encoding="utf-8")
    path = tmp_path / "adapter.yaml"
    path.write_text(
        "name: t\nframework: pydantic-ai\nfactory: cm_pai_factory:build\n" + extra, encoding="utf-8"
    )
    return path


@pytest.fixture
def clean_modules() -> Iterator[None]:
    yield
    for name in [n for n in sys.modules if n.startswith("cm_pai_")]:
        del sys.modules[name]


ESCAPING = """
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

def build(ctx):
    provider = OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key="k")
    return Agent(OpenAIChatModel("m", provider=provider)), Store("c.db")
"""

NOT_A_PAIR = """
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel

def build(ctx):
    return Agent(OpenAIChatModel("gpt-4o-mini"))
"""

NO_FILE = """
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel

class Memory:
    def get_messages(self):
        return []
    def add_messages(self, messages):
        pass

def build(ctx):
    return Agent(OpenAIChatModel("gpt-4o-mini")), Memory()
"""

OWN = """
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel

def build(ctx):
    return Agent(OpenAIChatModel("gpt-4o-mini")), Store("c.db")
"""


@pytest.mark.parametrize(
    ("source", "extra", "says"),
    [
        (ESCAPING, "", "the agent's model client did not reach crashmatrix's model at http://127.0.0.1:"),
        (NOT_A_PAIR, "", "factory: it returned Agent; return (agent, store)"),
        (NO_FILE, "", "factory: the store has no file path (a path attribute)"),
        (OWN, "tools: harness\n", "tools: harness: a PydanticAI agent runs its own tools here"),
        (OWN, "options: {durability: exit}\n", "pydantic-ai takes no option 'durability'"),
        ("import no_such_team_library\n", "", "importing cm_pai_factory raised ModuleNotFoundError at "),
        ("def other(ctx):\n    pass\n", "", "factory: cm_pai_factory has no function 'build'"),
    ],
)
def test_an_agent_that_cannot_be_tested_is_one_line_at_load(
    tmp_path: Path, clean_modules: None, source: str, extra: str, says: str
) -> None:
    with pytest.raises(InputError) as caught:
        load_adapter(str(_yaml(tmp_path, source, extra)))
    assert "\n" not in str(caught.value)
    assert says in str(caught.value)


def test_the_team_agents_own_tools_decide_what_applies(clean_modules: None) -> None:
    adapter = load_adapter(str(TEAM / "adapter.yaml"))
    tools = adapter.capabilities.tools  # type: ignore[attr-defined]
    assert tools.has("send_email") and tools.has("create_order") and not tools.has("read_file")
    assert adapter.capabilities.approvals is False  # type: ignore[attr-defined]  # its tools ask nothing
    # ... so the moments of an approval are not reachable, with why (not "not reached").
    assert "after_approved" not in adapter.boundaries
    assert adapter.unreachable["after_tool_call_saved"] == pai.WHY_NO_APPROVAL  # type: ignore[attr-defined]
    assert set(adapter.boundaries) == {
        "after_model_reply",
        "after_running",
        "after_side_effect",
        "after_tool_result",
    }
    assert "after_tool_call_pending" in adapter.unreachable  # type: ignore[attr-defined]
    # The load check imported the team's modules in a scratch directory and dropped them.
    assert "support_agent" not in sys.modules


def test_an_agent_with_a_tool_that_requires_approval_asks(tmp_path: Path, clean_modules: None) -> None:
    source = OWN.replace(
        'return Agent(OpenAIChatModel("gpt-4o-mini")), Store("c.db")',
        'agent = Agent(OpenAIChatModel("gpt-4o-mini"), output_type=[str, DeferredToolRequests])\n'
        "    agent.tool_plain(requires_approval=True)(send_email)\n"
        '    return agent, Store("c.db")',
    )
    source = (
        "from pydantic_ai import DeferredToolRequests\n"
        + source
        + ('\ndef send_email(to: str) -> str:\n    """Send."""\n    return "sent"\n')
    )
    adapter = load_adapter(str(_yaml(tmp_path, source)))
    assert adapter.capabilities.approvals is True  # type: ignore[attr-defined]
    assert {"after_tool_call_saved", "after_approved"} <= set(adapter.boundaries)


# RetryPromptPart: an older PydanticAI's retry, still read (a store keeps old rows).
RETRY_PART = pytest.mark.filterwarnings("ignore:`RetryPromptPart` is deprecated")


def _messages() -> list[Any]:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    return [
        ModelRequest(parts=[UserPromptPart(content="Email Bob")]),
        ModelResponse(
            parts=[
                TextPart(content="On it."),
                ToolCallPart(tool_name="send_email", args={"to": "bob"}, tool_call_id="c1"),
                ToolCallPart(tool_name="create_order", args='{"item": "x"}', tool_call_id="c2"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart(tool_name="send_email", content="Email sent to bob.", tool_call_id="c1"),
                RetryPromptPart(tool_name="create_order", content="quantity is missing", tool_call_id="c2"),
            ]
        ),
        ModelResponse(parts=[TextPart(content="Done.")]),
    ]


@RETRY_PART
def test_its_messages_read_as_chat_records_with_what_the_model_was_told() -> None:
    records = pai.records_of(_messages())
    bodies = [r["message"] for r in records]
    assert [b["role"] for b in bodies] == ["user", "assistant", "tool", "tool", "assistant"]
    assert bodies[1]["content"] == "On it."
    calls = bodies[1]["tool_calls"]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [("c1", "send_email"), ("c2", "create_order")]
    assert json.loads(calls[0]["function"]["arguments"]) == {"to": "bob"}
    assert bodies[2] == {"role": "tool", "tool_call_id": "c1", "content": "Email sent to bob."}
    # A retry prompt is what the model was told of that call: the error and "try again".
    assert bodies[3]["tool_call_id"] == "c2" and "quantity is missing" in bodies[3]["content"]
    assert "Fix the errors and try again" in bodies[3]["content"]  # the example adapters' error rule
    assert bodies[4] == {"role": "assistant", "content": "Done."}


@RETRY_PART
def test_the_store_is_read_from_where_the_factory_put_it_the_running_run_after_it(tmp_path: Path) -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    workspace = tmp_path / "world" / "workspace"
    workspace.mkdir(parents=True)
    messages = _messages()
    with sqlite3.connect(workspace / "conversations.db") as db:
        db.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, message_list TEXT)")
        for run in (messages[:2], messages[2:]):  # one row per run, as the chat-app example saves
            db.execute(
                "INSERT INTO messages (message_list) VALUES (?)", (ModelMessagesTypeAdapter.dump_json(run),)
            )
    assert pai.read_records(workspace) == []  # no life said where its store is yet

    class Store:
        path = str(workspace / "conversations.db")

        def get_messages(self) -> list[Any]:
            return []

        def add_messages(self, messages: bytes) -> None:
            pass

    pai._write_store(tmp_path, pai._store_of("adapter.yaml", Store(), workspace, {}))
    assert json.loads((tmp_path / pai.STORE_NAME).read_text())["path"] == "conversations.db"  # relative
    assert len(pai.read_records(workspace)) == 5
    pai._RUNNING[:] = messages[:2]  # a run's messages, in memory while its tools run
    try:
        assert len(pai.read_records(workspace)) == 7
    finally:
        pai._RUNNING.clear()


@RETRY_PART
def test_the_doctor_writes_a_record_where_the_reader_finds_it(tmp_path: Path) -> None:
    """Record n of ``read_records`` is found again in its row, message and part: a Tool
    Result written twice reads as two, a call's argument changed reads changed."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    from crashmatrix.harness.agents.frameworks.pydantic_ai_records import StoreMessages

    path = tmp_path / "c.db"
    messages = _messages()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, message_list TEXT)")
        for run in (messages[:2], messages[2:]):
            db.execute(
                "INSERT INTO messages (message_list) VALUES (?)", (ModelMessagesTypeAdapter.dump_json(run),)
            )
    store = StoreMessages(path, "messages", "message_list")

    def read() -> list[Mapping[str, Any]]:
        return [r["message"] for r in pai.records_of(pai.store_messages(path))]

    assert json.loads(store.get(3))["tool_call_id"] == "c1"  # record 3: the first return part
    store.again(3)
    assert [(m["role"], m.get("tool_call_id")) for m in read()][2:5] == [
        ("tool", "c1"),
        ("tool", "c1"),
        ("tool", "c2"),
    ]
    raw = store.get(2)  # the response with both calls
    store.replace(2, raw.replace(b"bob", b"xyz"))
    assert json.loads(read()[1]["tool_calls"][0]["function"]["arguments"]) == {"to": "xyz"}
    with pytest.raises(CannotPlant) as caught:
        store.tear(6)
    assert caught.value.not_applicable


def test_the_brackets_are_around_the_team_function_and_keep_calls_concurrent() -> None:
    """PydanticAI runs a response's calls concurrently; the brackets do not serialise them:
    both tools start before either returns, each bracketed by its own call id."""
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    events: list[str] = []
    agent = Agent(TestModel())

    @agent.tool_plain
    async def one() -> str:
        events.append("one acts")
        await asyncio.sleep(0.01)
        return "1"

    @agent.tool_plain
    async def two() -> str:
        events.append("two acts")
        await asyncio.sleep(0.01)
        return "2"

    names = pai.bracket_tools(
        agent, lambda c, ctx: events.append(f"before {c}"), lambda c: events.append(f"after {c}")
    )
    assert names == ["one", "two"]
    assert pai.bracket_tools(agent, lambda c, ctx: None, lambda c: None) == ["one", "two"]  # once only
    asyncio.run(agent.run("go"))
    befores = [e for e in events if e.startswith("before")]
    assert len(befores) == 2 and events.index("two acts") < events.index(f"after {befores[0][7:]}")
    assert events.index(befores[0]) < events.index("one acts")
    assert sum(1 for e in events if e.startswith("after")) == 2


# -- real lives ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def launcher() -> Iterator[object]:
    # The server ``pytest --agent`` would start, both team agents loaded warm in it: a bare
    # pydantic_ai one made every life import openai and load the adapter again.
    yield warm_launcher(TEAM / "adapter.yaml", TEAM / "adapter_fixed.yaml")


def _run(launcher: object, adapter: Path, scenario_file: str, point: str, tmp_path: Path) -> Any:
    from crashmatrix.harness.front.cases import run_point
    from crashmatrix.harness.input.scenario import load_scenario

    return run_point(
        load_scenario(SUITE / scenario_file),
        None if point == "clean" else parse_point(point),
        launcher,  # type: ignore[arg-type]
        tmp_path / adapter.stem,
        agent=str(adapter),
        deadline=60.0,
    )


def _workspace(result: Any) -> Path:
    return Path(result.case_dir) / "world" / "workspace"


@pytest.mark.slow
def test_the_docs_agent_sends_twice_into_its_own_outbox_after_a_crash_past_the_send(
    launcher: object, tmp_path: Path
) -> None:
    point = "after_side_effect[call_mail]"
    result = _run(launcher, TEAM / "adapter.yaml", "send_email/send_once.yaml", point, tmp_path)
    verdict = result.verdict
    assert verdict.status == "failed"
    assert "non_idempotent_at_most_once" in [v.invariant for v in verdict.violations]
    # Counted in the team's own outbox, written by its own send_email.
    assert len((_workspace(result) / "outbox.jsonl").read_text().splitlines()) == 2
    # Its own store, where its own code put it, read back as the conversation: the killed
    # run saved nothing, the restarted app sent the turn again.
    log = pai.read_records(_workspace(result))
    assert [r["message"]["role"] for r in log] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.slow
def test_the_docs_agent_places_a_second_order_in_its_own_table(launcher: object, tmp_path: Path) -> None:
    point = "after_side_effect[call_order]"
    result = _run(launcher, TEAM / "adapter.yaml", "create_order/keyed_once.yaml", point, tmp_path)
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
    result = _run(launcher, TEAM / "adapter_fixed.yaml", scenario_file, point, tmp_path)
    verdict = result.verdict
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems
    outbox = _workspace(result) / "outbox.jsonl"
    assert (len(outbox.read_text().splitlines()) if outbox.exists() else 0) == emails
    if orders:
        with sqlite3.connect(_workspace(result) / "orders.db") as db:
            assert db.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == orders


@pytest.mark.slow
def test_a_second_turns_effect_belongs_to_the_second_turns_call(launcher: object, tmp_path: Path) -> None:
    """The app saves a run's messages only when it returns: while its tool runs, the run's
    messages are in what the adapter reads, so the second turn's order is its own call's
    (without them, both orders were the first call's: two effects of one call)."""
    result = _run(
        launcher, TEAM / "adapter.yaml", "create_order/two_orders_two_turns.yaml", "clean", tmp_path
    )
    verdict = result.verdict
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems
    assert verdict.observed.world["orders"] == 2


ASKING = """
import fixed
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.models.openai import OpenAIChatModel


def build(ctx):
    agent = Agent(OpenAIChatModel("gpt-4o-mini"), output_type=[str, DeferredToolRequests])
    agent.tool(requires_approval=True)(fixed.create_order)
    return agent, Store("conversations.db")
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("point", "orders", "told"),
    [
        # Parked and saved, nobody answered: asked in the next life for the first time (yes).
        ("after_tool_call_saved[call_desks]", 1, "succeeded"),
        # Said yes, killed before the run went on: asked again (approvals_again: no).
        ("after_approved[call_desks]", 0, "rejected"),
    ],
)
def test_an_agent_that_asks_is_asked_again_after_a_restart(
    launcher: object, tmp_path: Path, clean_modules: None, point: str, orders: int, told: str
) -> None:
    for name in ("fixed.py", "support_agent.py"):
        (tmp_path / name).write_text((TEAM / name).read_text(encoding="utf-8"), encoding="utf-8")
    fixed_yaml = (TEAM / "adapter_fixed.yaml").read_text(encoding="utf-8")
    adapter = _yaml(tmp_path, ASKING, fixed_yaml.split("catalogue:", 1)[1].join(["catalogue:", ""]))
    result = _run(launcher, adapter, "approvals/reapproval_rejected.yaml", point, tmp_path)
    verdict = result.verdict
    assert verdict.observed.world["orders"] == orders
    assert verdict.observed.told["call_desks"] == told
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems


@pytest.mark.slow
def test_the_doctors_faults_land_in_the_teams_own_store(launcher: object, tmp_path: Path) -> None:
    """``crashmatrix doctor`` plants each check's fault in the store's own rows, the place
    ``read_records`` reads (``pydantic_ai_records.StoreMessages``): every check that applies
    fires, and the final answer's write cut short is not applicable, with why (a run's
    messages are one row, committed whole)."""
    from crashmatrix.harness.front.doctor import run_doctor

    coverage = run_doctor(str(TEAM / "adapter.yaml"), launcher=launcher, work=tmp_path)  # type: ignore[arg-type]
    states = {result.check: result.state for result in coverage.results}
    assert coverage.blind == (), coverage.table()
    assert states["one_tool_result_per_call"] == "fires", coverage.table()
    assert states["non_idempotent_at_most_once"] == "fires", coverage.table()
    assert states["turn_ends_with_final"] == "n.a.", coverage.table()
    assert "which SQLite commits whole" in coverage.table()
