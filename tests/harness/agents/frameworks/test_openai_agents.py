"""The OpenAI Agents SDK adapter: bad factories are one line (exit 2), the SDK's model requests
reach the mocks, the SDK's default agent is caught sending an email twice after a crash past
the send, and the ledgered example is not; approvals answered the SDK's way (a rejected call
never runs) and what the SDK does with them on a crash, pinned."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("agents")
respx = pytest.importorskip("respx")

from crashmatrix.harness.agents.frameworks import openai_agents as oa  # noqa: E402
from crashmatrix.harness.agents.loading import load_adapter  # noqa: E402
from crashmatrix.harness.agents.protocol import MODEL_BASE_URL  # noqa: E402
from crashmatrix.harness.core.boundaries import parse_point  # noqa: E402
from crashmatrix.harness.errors import InputError  # noqa: E402

from .pytest_agent import collected_and_clean  # noqa: E402

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[4]
SUITE = ROOT / "scenarios"
EXAMPLE = "examples.openai_agents_agent"
SEND_ONCE = "send_email/send_once.yaml"


@pytest.fixture
def user_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A team's module with factories, one per way of getting it wrong."""
    from agents import Agent, SQLiteSession

    def agent(ctx: oa.AgentsContext) -> Agent[None]:
        return Agent(name="a", model=ctx.model)

    module = types.ModuleType("crashmatrix_oa_user")
    module.no_session = agent  # type: ignore[attr-defined]
    module.none_session = lambda ctx: (agent(ctx), None)  # type: ignore[attr-defined]
    module.memory = lambda ctx: (agent(ctx), SQLiteSession(ctx.session_id))  # type: ignore[attr-defined]
    module.other_id = lambda ctx: (agent(ctx), SQLiteSession("mine", ctx.db_path))  # type: ignore[attr-defined]
    module.not_an_agent = lambda ctx: ("agent", SQLiteSession(ctx.session_id, ctx.db_path))  # type: ignore[attr-defined]
    module.raises = lambda ctx: 1 / 0  # type: ignore[attr-defined]
    module.good = lambda ctx: (agent(ctx), SQLiteSession(ctx.session_id, ctx.db_path))  # type: ignore[attr-defined]
    module.state_elsewhere = lambda ctx: (  # type: ignore[attr-defined]
        agent(ctx),
        SQLiteSession(ctx.session_id, ctx.db_path),
        ctx.db_path.with_name("mine.json"),
    )
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("crashmatrix_oa_user:no_session", "returned an Agent without a session"),
        ("crashmatrix_oa_user:none_session", "returned no session"),
        ("crashmatrix_oa_user:memory", "not at ctx.db_path"),
        ("crashmatrix_oa_user:other_id", "not at ctx.db_path under ctx.session_id"),
        ("crashmatrix_oa_user:not_an_agent", "first value is a str, not an Agent"),
        ("crashmatrix_oa_user:raises", "the factory raised ZeroDivisionError"),
        (
            "crashmatrix_oa_user:state_elsewhere",
            "to keep the RunState across lives return (agent, session, ctx.run_state_path)",
        ),
        ("crashmatrix_oa_user:missing", "has no function 'missing'"),
        ("no_such_module_here:build", "cannot import 'no_such_module_here'"),
    ],
)
def test_a_bad_factory_is_one_line_naming_the_agent_value(
    user_module: types.ModuleType, target: str, says: str
) -> None:
    with pytest.raises(InputError) as caught:
        load_adapter(f"openai-agents:{target}")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"--agent='openai-agents:{target}'")
    assert says in message


def test_an_agent_with_a_session_at_the_case_path_is_accepted(user_module: types.ModuleType) -> None:
    adapter = load_adapter("openai-agents:crashmatrix_oa_user:good")
    assert isinstance(adapter, oa.OpenAIAgentsAdapter)
    assert adapter.keeps_ledger is False
    assert "crashmatrix_oa_user" in adapter.preload and "agents" in adapter.preload


def test_a_version_outside_the_range_is_named_with_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.0.0")
    with pytest.raises(
        InputError, match=r"openai-agents 1\.0\.0 is installed; this adapter supports >=0\.21\.0,<1"
    ):
        load_adapter("openai-agents:crashmatrix_oa_user:good")


def _completion(content: str) -> dict[str, object]:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "crashmatrix-scripted",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
        ],
    }


def test_the_sdk_model_sends_through_the_intercepted_client() -> None:
    """openai 3.x sends through httpx2 unless handed an httpx client; respx patches httpx
    only. Every request of a Runner run must reach the router, and nothing else: the router
    refuses (assert_all_mocked) any request it has no route for."""
    from agents import Agent, Runner, set_tracing_disabled

    set_tracing_disabled(True)
    router = respx.MockRouter(assert_all_mocked=True, assert_all_called=False)
    route = router.post(f"{MODEL_BASE_URL}/chat/completions").mock(
        return_value=httpx.Response(200, json=_completion("mocked"))
    )

    async def run() -> str:
        async with httpx.AsyncClient() as http:
            agent = Agent(name="a", instructions="be brief", model=oa.chat_model(MODEL_BASE_URL, http))
            result = await Runner.run(agent, "hello")
            return str(result.final_output)

    with router:
        answer = asyncio.run(run())
        assert route.call_count == 1
        sent = json.loads(route.calls[0].request.content)
        assert len(router.calls) == 1  # no other request, to any host
    assert answer == "mocked"
    assert sent["messages"][-1] == {"role": "user", "content": "hello"}


def test_the_session_items_read_as_chat_messages(tmp_path: Path) -> None:
    """The SDK's stored items (as 0.24 writes them) -> our records: one assistant message per
    step's calls, each output a tool message."""
    import sqlite3

    db = tmp_path / "s.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, message_data TEXT)")
    items = [
        {"content": "hi", "role": "user"},
        {
            "type": "function_call",
            "call_id": "a",
            "name": "send_email",
            "arguments": "{}",
            "id": "__fake_id__",
        },
        {"type": "function_call", "call_id": "b", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": '{"ok": true}'},
        {"type": "function_call_output", "call_id": "b", "output": '{"ok": true}'},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
    ]
    conn.executemany(
        "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
        [("case", json.dumps(item)) for item in items]
        + [("other", json.dumps({"content": "x", "role": "user"}))],
    )
    conn.commit()
    conn.close()
    log, lines = oa.read_session(db, "case")
    messages = [e.message for e in log.entries]  # type: ignore[union-attr]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c.id for c in messages[1].tool_calls] == ["a", "b"]
    assert messages[4].content == "Done."
    assert len(lines) == 5


def test_a_call_saved_twice_reads_as_two_replies(tmp_path: Path) -> None:
    """A stop for approval saves the call; a restarted life whose model asks again saves it
    again: two replies asking the same id, not one reply with a call listed twice."""
    import sqlite3

    db = tmp_path / "s.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, message_data TEXT)")
    call = {"type": "function_call", "call_id": "a", "name": "send_email", "arguments": "{}"}
    items = [
        {"content": "hi", "role": "user"},
        call,
        call,
        {"type": "function_call_output", "call_id": "a", "output": "{}"},
    ]
    conn.executemany(
        "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
        [("case", json.dumps(item)) for item in items],
    )
    conn.commit()
    conn.close()
    messages = [e.message for e in oa.read_session(db, "case")[0].entries]  # type: ignore[union-attr]
    assert [m.role for m in messages] == ["user", "assistant", "assistant", "tool"]
    assert [[c.id for c in m.tool_calls] for m in messages[1:3]] == [["a"], ["a"]]


def test_a_rejection_is_told_in_the_tools_vocabulary() -> None:
    from crashmatrix.harness.core.categories import CRASHMATRIX

    fresh = json.loads(oa.rejection("send_email", None, again=False))
    again = json.loads(oa.rejection("send_email", None, again=True))
    assert (fresh["code"], fresh["ok"], "recovery" in fresh) == ("REJECTED", False, False)
    assert again["recovery"] == "reapproval"
    assert CRASHMATRIX.category(json.dumps(fresh)) == "rejected"


# -- real lives ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def launcher() -> Iterator[object]:
    from crashmatrix.harness.lives.injector import LifeLauncher

    # The example is imported by its dotted name from the repository root, in the lives too.
    added = str(ROOT) not in sys.path
    if added:
        sys.path.insert(0, str(ROOT))
    yield LifeLauncher("fork", preload=("agents", oa.__name__))
    if added:
        sys.path.remove(str(ROOT))


def _run(launcher: object, module: str, point: str, tmp_path: Path, scenario_file: str = SEND_ONCE) -> object:
    """One case of the example ``module``; ``point`` "clean" is the run without a crash."""
    from crashmatrix.harness.front.cases import run_point
    from crashmatrix.harness.input.scenario import load_scenario

    scenario = load_scenario(SUITE / scenario_file)
    return run_point(
        scenario,
        None if point == "clean" else parse_point(point),
        launcher,  # type: ignore[arg-type]
        tmp_path / module,
        agent=f"openai-agents:{EXAMPLE}.{module}:build",
        deadline=60.0,
    )


@pytest.mark.slow
def test_the_sdk_default_agent_sends_the_email_again_after_a_crash_past_the_send(
    launcher: object, tmp_path: Path
) -> None:
    result = _run(launcher, "agent", "after_side_effect[call_mail]", tmp_path)
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "failed"
    assert "non_idempotent_at_most_once" in [v.invariant for v in verdict.violations]
    assert verdict.observed.world["emails"] == 2
    assert result.lives == 2  # type: ignore[attr-defined]
    case_dir: Path = result.case_dir  # type: ignore[attr-defined]
    # The session read back from the SDK's SQLite: the call saved once, after the second send.
    log, _ = oa.read_session(oa.OpenAIAgentsAdapter.db_path(case_dir), "case")
    assert [e.message.role for e in log.entries] == ["user", "assistant", "tool", "assistant"]  # type: ignore[union-attr]
    # Every model request reached the scripted model: 2 in each life (the call, the answer
    # in life 2; the call in life 1), each logged and each marked in the trace.
    requests = (case_dir / "model_requests.jsonl").read_text().splitlines()
    trace = [json.loads(line) for line in (case_dir / "trace.jsonl").read_text().splitlines()]
    assert len(requests) == 3 == sum(1 for event in trace if event.get("event") == "model_request")


@pytest.mark.slow
@pytest.mark.parametrize("module", ["agent", "fixed"])
def test_a_kill_after_the_model_replied_asks_the_model_again_and_sends_once(
    launcher: object, tmp_path: Path, module: str
) -> None:
    """after_model_reply: the reply with its call is only in memory; the restarted life
    continues the turn, the model is asked again, and the email goes out once."""
    result = _run(launcher, module, "after_model_reply[call_mail]", tmp_path)
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems
    assert verdict.observed.world["emails"] == 1
    assert verdict.observed.told["call_mail"] == "succeeded"
    case_dir: Path = result.case_dir  # type: ignore[attr-defined]
    trace = [json.loads(line) for line in (case_dir / "trace.jsonl").read_text().splitlines()]
    life_1 = [event for event in trace if event.get("life") == 1]
    # Killed right after the reply: no tool started in life 1, nothing of the reply saved.
    assert [e["event"] for e in life_1] == ["start", "model_request", "boundary", "crash"]
    assert life_1[2]["boundary"] == "after_model_reply" and life_1[2]["call"] == "call_mail"
    assert life_1[3]["point"] == "after_model_reply[call_mail]"
    # Life 2 asked the model again (the turn unanswered) and ran the tool once.
    life_2 = [event for event in trace if event.get("life") == 2]
    assert [e.get("boundary") for e in life_2 if e["event"] == "boundary"] == [
        "after_model_reply",
        "after_running",
        "after_side_effect",
        "after_tool_result",
    ]
    assert result.lives == 2  # type: ignore[attr-defined]
    log, _ = oa.read_session(oa.OpenAIAgentsAdapter.db_path(case_dir), "case")
    assert [e.message.role for e in log.entries] == ["user", "assistant", "tool", "assistant"]  # type: ignore[union-attr]


@pytest.mark.slow
def test_the_ledgered_agent_does_not_send_again(launcher: object, tmp_path: Path) -> None:
    result = _run(launcher, "fixed", "after_side_effect[call_mail]", tmp_path)
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "passed", verdict.mismatches or verdict.violations
    assert verdict.observed.world["emails"] == 1
    assert verdict.observed.told["call_mail"] == "uncertain"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario_file", "point", "call", "outcome", "told", "world"),
    [
        # a keyed order killed before it ran: looked up by its key (not found), placed under
        # the same key (its response lost), looked up again (found): one order, reconciled
        (
            "create_order/keyed_response_lost.yaml",
            "after_running[call_gadget]",
            "call_gadget",
            "reconciled",
            "succeeded",
            ("orders", 1),
        ),
        # the same order without a crash: the lost response is reconciled at once
        (
            "create_order/keyed_response_lost.yaml",
            "clean",
            "call_gadget",
            "reconciled",
            "succeeded",
            ("orders", 1),
        ),
        # a whole-file write killed after it wrote, then the file edited by someone else: its
        # hash is neither the saved base nor the planned after, so the write is not repeated
        (
            "write_file/external_change_conflict.yaml",
            "after_side_effect[call_notes]",
            "call_notes",
            "conflict",
            "conflict",
            ("notes.txt", "edited by a colleague\n"),
        ),
        # killed after it wrote: the file already holds the planned after hash
        (
            "write_file/overwrite_existing.yaml",
            "after_side_effect[call_bump]",
            "call_bump",
            "already_applied",
            "succeeded",
            None,
        ),
        # killed before it wrote: the file is still at its base, so it is written again
        (
            "write_file/overwrite_existing.yaml",
            "after_running[call_bump]",
            "call_bump",
            "reapplied",
            "succeeded",
            None,
        ),
        # a read that timed out is read again, once
        ("faults/read_file_timeout_retry.yaml", "clean", "call_settings", "completed", "succeeded", None),
    ],
)
def test_the_ledgered_agent_recovers_by_the_tools_contract(
    launcher: object,
    tmp_path: Path,
    scenario_file: str,
    point: str,
    call: str,
    outcome: str,
    told: str,
    world: tuple[str, object] | None,
) -> None:
    result = _run(launcher, "fixed", point, tmp_path, scenario_file)
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems
    assert verdict.observed.outcome[call] == outcome
    assert verdict.observed.told[call] == told
    if world is not None:  # a count, or one file's content
        name, want = world
        got = verdict.observed.world["files"].get(name) if "." in name else verdict.observed.world[name]
        assert got == want


@pytest.mark.slow
def test_the_cli_exits_2_with_one_line_for_an_agent_without_a_session(tmp_path: Path) -> None:
    module = tmp_path / "oa_no_session.py"
    module.write_text(
        "from agents import Agent\n\ndef build(ctx):\n    return Agent(name='a', model=ctx.model)\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "crashmatrix.harness.front.cli",
            "run",
            str(SUITE / "send_email" / "send_once.yaml"),
            "--agent",
            "openai-agents:oa_no_session:build",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "openai-agents:oa_no_session:build" in lines[0] and "without a session" in lines[0]


# -- approvals -------------------------------------------------------------------------------


def _asked(case_dir: Path) -> list[dict[str, object]]:
    """What the scenario's person was asked, life by life (the adapter's memory file)."""
    path = oa.OpenAIAgentsAdapter.db_path(case_dir).with_name(oa.ASKED_NAME)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _boundaries(case_dir: Path, life: int) -> list[str]:
    trace = [json.loads(line) for line in (case_dir / "trace.jsonl").read_text().splitlines()]
    return [e["boundary"] for e in trace if e.get("life") == life and e["event"] == "boundary"]


@pytest.mark.slow
@pytest.mark.parametrize("module", ["agent", "fixed"])
def test_a_rejected_call_never_runs(launcher: object, tmp_path: Path, module: str) -> None:
    """approvals/send_email_rejected: the SDK stops for send_email, the person says no, the
    tool is never invoked and the model is told REJECTED."""
    result = _run(launcher, module, "clean", tmp_path, "approvals/send_email_rejected.yaml")
    verdict = result.verdict  # type: ignore[attr-defined]
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems
    assert verdict.observed.world["emails"] == 0
    assert verdict.observed.told["call_board"] == "rejected"
    assert verdict.observed.code["call_board"] == "REJECTED"
    case_dir: Path = result.case_dir  # type: ignore[attr-defined]
    assert [(a["call_id"], a["again"], a["approved"]) for a in _asked(case_dir)] == [
        ("call_board", False, False)
    ]
    # The call parked in the session before the answer; no tool ran, so no after_running.
    assert _boundaries(case_dir, 1) == ["after_model_reply", "after_tool_call_saved", "after_tool_result"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("factory", "asked", "told", "orders", "unanswered"),
    [
        # The approval lived in memory: the restarted SDK asks the model again, parks the call
        # a second time, the person is asked again and says no. The first parked copy is never
        # answered (the SDK drops it from the model's input, the session keeps it).
        ("agent:build", [(1, False, True), (2, True, False)], "rejected", 0, True),
        # The app kept the RunState with the approval: it stands, nobody is asked again, and
        # the order is placed on an approval given before the restart.
        ("agent:build_durable", [(1, False, True)], "succeeded", 1, False),
        # The ledger knows the call never started: it asks again first (seed 000).
        ("fixed:build", [(1, False, True), (2, True, False)], "rejected", 0, False),
    ],
)
def test_a_crash_after_the_approval_is_what_the_sdk_does(
    launcher: object,
    tmp_path: Path,
    factory: str,
    asked: list[tuple[int, bool, bool]],
    told: str,
    orders: int,
    unanswered: bool,
) -> None:
    """approvals/reapproval_rejected at after_approved: yes in life 1, no if asked again."""
    module, _, name = factory.partition(":")
    result = run_named(
        launcher, module, name, "after_approved[call_desks]", tmp_path, "approvals/reapproval_rejected.yaml"
    )
    verdict = result.verdict  # type: ignore[attr-defined]
    case_dir: Path = result.case_dir  # type: ignore[attr-defined]
    assert _boundaries(case_dir, 1)[-1] == "after_approved"
    assert [(a["life"], a["again"], a["approved"]) for a in _asked(case_dir)] == asked
    assert verdict.observed.told["call_desks"] == told
    assert verdict.observed.world["orders"] == orders
    invariants = [v.invariant for v in verdict.violations]
    assert ("one_tool_result_per_call" in invariants) is unanswered
    assert (verdict.status == "passed") is (factory == "fixed:build")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("factory", "asks", "emails", "told"),
    [
        ("agent:build", 2, 2, "succeeded"),  # asked again, yes again: sent twice
        ("agent:build_durable", 1, 2, "succeeded"),  # the kept approval reruns the send: twice
        ("fixed:build", 1, 1, "uncertain"),  # the ledger says it was running: not sent again
    ],
)
def test_an_approved_email_killed_after_the_send(
    launcher: object, tmp_path: Path, factory: str, asks: int, emails: int, told: str
) -> None:
    """send_once.yaml with the email approved, killed after the send."""
    scenario = tmp_path / "send_approved.yaml"
    text = (SUITE / SEND_ONCE).read_text()
    scenario.write_text(text.replace("\nturns:", '\napprovals: {send_email: "yes"}\nturns:', 1))
    module, _, name = factory.partition(":")
    result = run_named(launcher, module, name, "after_side_effect[call_mail]", tmp_path, str(scenario))
    verdict = result.verdict  # type: ignore[attr-defined]
    case_dir: Path = result.case_dir  # type: ignore[attr-defined]
    assert len(_asked(case_dir)) == asks
    assert verdict.observed.world["emails"] == emails
    assert verdict.observed.told["call_mail"] == told


def run_named(
    launcher: object, module: str, factory: str, point: str, tmp_path: Path, scenario_file: str
) -> object:
    """One case of ``examples.openai_agents_agent.<module>:<factory>``."""
    from crashmatrix.harness.front.cases import run_point
    from crashmatrix.harness.input.scenario import load_scenario

    scenario = load_scenario(SUITE / scenario_file)  # an absolute path stays itself
    return run_point(
        scenario,
        parse_point(point),
        launcher,  # type: ignore[arg-type]
        tmp_path / f"{module}-{factory}",
        agent=f"openai-agents:{EXAMPLE}.{module}:{factory}",
        deadline=60.0,
    )


@pytest.mark.slow  # the inner run starts its fork server
def test_pytest_collects_a_built_in_scenario_with_the_agents_sdk_adapter_as_agent(
    pytester: pytest.Pytester,
) -> None:
    # As the LangGraph adapter's: every scenario failed to collect.
    collected_and_clean(pytester, "openai-agents:examples.openai_agents_agent.agent:build")
