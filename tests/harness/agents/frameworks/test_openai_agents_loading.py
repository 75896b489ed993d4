"""Loading a team's Agents SDK module: whatever its import raises is one line naming the
``--agent`` value, the module and the error (where the team's code raised it), never a
traceback; the factory is built at load with every suite tool in ``ctx.tools``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("agents")

from crashmatrix.harness.agents.loading import load_adapter
from crashmatrix.harness.errors import InputError

GOOD_FACTORY = """
from agents import Agent, SQLiteSession

def build(ctx):
    tools = {tool.name: tool for tool in ctx.tools}
    agent = Agent(name="a", model=ctx.model, tools=[tools["send_email"], tools["read_file"]])
    return agent, SQLiteSession(ctx.session_id, ctx.db_path)
"""


@pytest.fixture
def on_path(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in [n for n in sys.modules if n.startswith("cm_oa_team_")]:
        del sys.modules[name]


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("import no_such_library_here\n", "importing 'cm_oa_team_{n}' failed at {path}:1: No module named"),
        ("def build(ctx:\n", "importing 'cm_oa_team_{n}' raised SyntaxError at {path}:1"),
        ("x = 1\nraise RuntimeError('no config')\n", "raised RuntimeError at {path}:2: no config"),
        ("x = 1\n", "cm_oa_team_{n} has no function 'build'"),
    ],
)
def test_an_error_in_the_teams_module_is_one_line_naming_agent_module_and_error(
    on_path: Path, source: str, says: str, request: pytest.FixtureRequest
) -> None:
    n = request.node.callspec.indices["source"]
    path = on_path / f"cm_oa_team_{n}.py"
    path.write_text(source)
    spec = f"openai-agents:cm_oa_team_{n}:build"
    with pytest.raises(InputError) as caught:
        load_adapter(spec)
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith(f"--agent={spec!r}: ")
    assert says.format(n=n, path=path) in line


def test_a_factory_picking_its_tools_by_name_loads_and_has_only_those(on_path: Path) -> None:
    (on_path / "cm_oa_team_pick.py").write_text(GOOD_FACTORY)
    adapter = load_adapter("openai-agents:cm_oa_team_pick:build")
    tools = adapter.capabilities.tools  # type: ignore[attr-defined]
    assert [t for t in ("send_email", "read_file", "write_file", "create_order") if tools.has(t)] == [
        "send_email",
        "read_file",
    ]


ESCAPING = """
from agents import Agent, OpenAIChatCompletionsModel, SQLiteSession
from openai import AsyncOpenAI

def build(ctx):
    client = AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    model = OpenAIChatCompletionsModel(model="m", openai_client=client)
    return Agent(name="a", model=model), SQLiteSession(ctx.session_id, ctx.db_path)
"""


def test_a_model_client_of_its_own_that_escapes_is_one_line_at_load(on_path: Path) -> None:
    (on_path / "cm_oa_team_escape.py").write_text(ESCAPING)
    with pytest.raises(InputError) as caught:
        load_adapter("openai-agents:cm_oa_team_escape:build")
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith("--agent='openai-agents:cm_oa_team_escape:build': the agent's model client")


def test_a_model_name_reaches_crashmatrixs_model_through_the_sdks_default_client(on_path: Path) -> None:
    """OPENAI_BASE_URL / OPENAI_API_KEY point at a loopback model before the factory runs, and
    the SDK's default API is chat completions: the load check's request arrives."""
    (on_path / "cm_oa_team_named.py").write_text(
        "from agents import Agent, SQLiteSession\n"
        "def build(ctx):\n"
        "    return Agent(name='a', model='gpt-4o-mini'), SQLiteSession(ctx.session_id, ctx.db_path)\n"
    )
    load_adapter("openai-agents:cm_oa_team_named:build")  # no error: the request arrived
