"""``python -m crashmatrix.reference_agent``: the reference agent at a prompt, or its self-check.

Interactive use talks to any OpenAI-compatible endpoint (``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``CRASHMATRIX_MODEL``) with the built-in mock tools acting on a mock world.
The session is ``WORKSPACE/.agent_state/session-ID.jsonl``, as in seed 000, so killing the
process mid-tool-call and starting it again shows recovery: it runs ``resume()`` before the
first ``You>`` prompt.

The world (``mock_tools.world.World``) keeps ``world.json`` and ``world.sqlite`` beside its
``workspace/`` directory, so it is rooted at the workspace's parent, and the workspace
directory must be named ``workspace``. The mock order service runs in-process behind an
``httpx.MockTransport``: the order tools never touch the network, only the model does.

``--self-check`` needs no endpoint: in a temporary directory it drives the agent with a
scripted model under respx (every request intercepted) through seed 000's clean
seven-record turn and its crash-and-recovery into twelve records.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import openai

from crashmatrix.harness.errors import HarnessError
from crashmatrix.mock_tools import MockToolbox, OrderAPI, World, catalogue
from crashmatrix.reference_agent.agent import Agent, AgentError
from crashmatrix.reference_agent.approval import Approver, ScriptedApprover, StdinApprover
from crashmatrix.reference_agent.lease import EXIT_LEASED, SessionLeased
from crashmatrix.reference_agent.model import ChatModel, ModelSettings, OpenAIChatModel, make_openai_client

__all__ = ["main", "self_check"]

STATE_DIR = ".agent_state"
WORLD_WORKSPACE = "workspace"  # mock_tools.world.World keeps its workspace under this name


class UsageError(Exception):
    """A bad command line or environment; reported as one line, never a traceback."""


def session_file(workspace: Path, session_id: str) -> Path:
    """Seed 000: ``workspace / ".agent_state" / f"session-{session_id}.jsonl"``."""
    return workspace / STATE_DIR / f"session-{session_id}.jsonl"


def open_world(workspace: Path, session_path: Path) -> World:
    """The world whose workspace is ``workspace`` (created on first use)."""
    workspace = workspace.absolute()
    if workspace.name != WORLD_WORKSPACE:
        raise UsageError(
            f"--workspace {workspace}: the mock world keeps its database beside a directory named "
            f"{WORLD_WORKSPACE!r}; pass --workspace {workspace / WORLD_WORKSPACE} (or another "
            f".../{WORLD_WORKSPACE})"
        )
    root = workspace.parent
    if (root / "world.json").exists():
        return World(root)
    return World.create(root, session_path=session_path)


def build_agent(
    *,
    world: World,
    session_path: Path,
    session_id: str,
    model: ChatModel,
    tools_http: httpx.Client,
    approver: Approver,
    **options: Any,
) -> Agent:
    contracts = catalogue()
    return Agent(
        session_path=session_path,
        session_id=session_id,
        model=model,
        toolbox=MockToolbox(world, contracts, tools_http),
        contracts=contracts,
        approver=approver,
        **options,
    )


# -- interactive ---------------------------------------------------------------------------------


def _finish_unfinished(agent: Agent) -> None:
    answer = agent.resume()
    if answer is not None:
        print(f"Agent> {answer}", flush=True)


def interactive(workspace: Path, session_id: str) -> int:
    settings = ModelSettings.from_env()
    workspace = workspace.absolute()
    session_path = session_file(workspace, session_id)
    world = open_world(workspace, session_path)
    api = OrderAPI(world)
    with (
        httpx.Client(timeout=settings.timeout) as model_http,
        httpx.Client(transport=httpx.MockTransport(api.handle)) as tools_http,
    ):
        model = OpenAIChatModel(make_openai_client(settings, model_http), settings.model)
        agent = build_agent(
            world=world,
            session_path=session_path,
            session_id=session_id,
            model=model,
            tools_http=tools_http,
            approver=StdinApprover(),
        )
        print(f"[session] {session_path}", flush=True)
        print(f"[model] {settings.model} at {settings.base_url}", flush=True)
        try:
            _finish_unfinished(agent)
            while True:
                try:
                    text = input("You> ")
                except EOFError:
                    print()
                    return 0
                if not text.strip():
                    continue
                try:
                    # A turn that failed earlier (a model error) is finished before a new one.
                    if agent.needs_continuation():
                        _finish_unfinished(agent)
                    print(f"Agent> {agent.run_turn(text)}", flush=True)
                except (AgentError, openai.OpenAIError) as error:
                    print(f"error: {error}", file=sys.stderr, flush=True)
        finally:
            agent.close()


# -- self-check ----------------------------------------------------------------------------------


class SelfCheckFailed(Exception):
    pass


class _Crash(BaseException):
    """Stands in for SIGKILL at a boundary; BaseException so nothing in the agent swallows it."""


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise SelfCheckFailed(message)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _shape(records: Sequence[dict[str, Any]]) -> list[str]:
    return [
        r["message"]["role"] + ("+calls" if r["message"].get("tool_calls") else "")
        if r["type"] == "message"
        else r["status"]
        for r in records
    ]


def _check_clean_turn(root: Path, router: Any, http: httpx.Client) -> None:
    from crashmatrix.harness.core.script import Reply, Rule, When
    from crashmatrix.mock_tools.model import ScriptedModel

    args = {"path": "ledger-demo.txt", "content": "hello ledger"}
    model = ScriptedModel(
        [
            Rule(When(role="user"), Reply(tool_calls=(("call_clean", "write_file", args),))),
            Rule(When(role="tool"), Reply("ledger-demo.txt created")),
        ]
    )
    world, path = _scripted_world(root, "clean", router)
    agent = _scripted_agent(world, path, model, router, http)
    try:
        answer = agent.run_turn("create ledger-demo.txt containing exactly: hello ledger")
    finally:
        agent.close()
    records = _records(path)
    shape = _shape(records)
    expected = ["user", "assistant+calls", "approved", "running", "succeeded", "tool", "assistant"]
    _expect(shape == expected, f"clean turn: records are {shape}, expected {expected}")
    _expect(answer == "ledger-demo.txt created", f"clean turn: answer {answer!r}")
    ledger = records[2:5]
    _expect(
        {r["tool_call_id"] for r in ledger} == {records[5]["message"]["tool_call_id"]} == {"call_clean"},
        "clean turn: lines 2-6 do not share one tool_call_id",
    )
    execution_ids = {r["execution_id"] for r in ledger}
    published = json.loads(records[5]["message"]["content"])
    _expect(
        len(execution_ids) == 1 and published.get("execution_id") in execution_ids,
        f"clean turn: execution ids {sorted(execution_ids)} / Tool Result {published.get('execution_id')!r}",
    )
    data = (world.workspace / "ledger-demo.txt").read_bytes()
    _expect(data == b"hello ledger", f"clean turn: the file holds {data!r}, expected b'hello ledger'")


def _check_crash_recovery(root: Path, router: Any, http: httpx.Client) -> None:
    from crashmatrix.harness.core.script import Reply, Rule, When
    from crashmatrix.mock_tools.model import ScriptedModel

    args = {"path": "recovery-demo.txt", "content": "recovered"}
    model = ScriptedModel(
        [
            Rule(When(role="user"), Reply(tool_calls=(("call_recovery_demo", "write_file", args),))),
            Rule(
                When(role="tool", tool="write_file", ok=True),
                Reply(tool_calls=(("call_verify", "read_file", {"path": "recovery-demo.txt"}),)),
            ),
            Rule(When(role="tool", tool="read_file"), Reply("recovery-demo.txt holds: recovered")),
            Rule(When(role="tool"), Reply("the write did not succeed")),
        ]
    )

    def die_after_running(boundary: str, tool_call_id: str) -> None:
        if boundary == "after_running":
            raise _Crash(boundary)

    world, path = _scripted_world(root, "crash", router)
    first = _scripted_agent(world, path, model, router, http, hook=die_after_running)
    try:
        first.run_turn("set the complete content of recovery-demo.txt to: recovered")
        raise SelfCheckFailed("crash recovery: the simulated crash after 'running' never happened")
    except _Crash:
        pass
    finally:
        first.close()
    scene = _shape(_records(path))
    _expect(scene == ["user", "assistant+calls", "approved", "running"], f"crash scene is {scene}")
    second = _scripted_agent(world, path, model, router, http)
    try:
        answer = second.resume()
    finally:
        second.close()
    records = _records(path)
    shape = _shape(records)
    expected = [
        "user",
        "assistant+calls",
        "approved",
        "running",
        "unknown",
        "approved",
        "running",
        "succeeded",
        "tool",
        "assistant+calls",
        "tool",
        "assistant",
    ]
    _expect(shape == expected, f"crash recovery: records are {shape}, expected {expected}")
    old, new = records[2]["execution_id"], records[5]["execution_id"]
    _expect(old != new, "crash recovery: the retry reused the interrupted execution_id")
    _expect(
        [r["execution_id"] for r in records[2:8]] == [old] * 3 + [new] * 3,
        "crash recovery: execution ids are not old x3 then new x3",
    )
    _expect(
        {r["tool_call_id"] for r in records[2:8]} == {records[8]["message"]["tool_call_id"]},
        "crash recovery: the attempts do not share the original tool_call_id",
    )
    for field in ("idempotency_key", "arguments_sha256"):
        values = {r[field] for r in records[2:8]}
        _expect(len(values) == 1, f"crash recovery: the attempts disagree on {field}: {sorted(values)}")
    published = json.loads(records[8]["message"]["content"])
    _expect(published.get("execution_id") == new, "crash recovery: the Tool Result names the wrong execution")
    users = sum(1 for r in records if r["type"] == "message" and r["message"]["role"] == "user")
    _expect(users == 1, "crash recovery: a user message was appended")
    _expect(answer == "recovery-demo.txt holds: recovered", f"crash recovery: answer {answer!r}")
    data = (world.workspace / "recovery-demo.txt").read_bytes()
    _expect(data == b"recovered", f"crash recovery: the file holds {data!r}")


_MODEL_BASE_URL = "http://model.self-check.test/v1"


def _scripted_world(root: Path, name: str, router: Any) -> tuple[World, Path]:
    """A fresh world for one check, its order service routed through ``router``."""
    from crashmatrix.mock_tools import install

    workspace = root / name / WORLD_WORKSPACE
    path = session_file(workspace, name)
    world = open_world(workspace, path)
    install(router, world)
    return world, path


def _scripted_agent(
    world: World, path: Path, model: Any, router: Any, http: httpx.Client, **options: Any
) -> Agent:
    router.post(f"{_MODEL_BASE_URL}/chat/completions").mock(side_effect=model.handle)
    settings = ModelSettings(_MODEL_BASE_URL, "self-check", "scripted", max_retries=0)
    return build_agent(
        world=world,
        session_path=path,
        session_id=path.stem.removeprefix("session-"),
        model=OpenAIChatModel(make_openai_client(settings, http), settings.model),
        tools_http=http,
        approver=ScriptedApprover(),
        **options,
    )


def self_check() -> str | None:
    """Run the built-in checks; None when they pass, else the first failure."""
    import respx

    with tempfile.TemporaryDirectory(prefix="reference-agent-self-check-") as tmp:
        root = Path(tmp)
        for check in (_check_clean_turn, _check_crash_recovery):
            # assert_all_mocked: a request to any host without a route raises, so nothing leaves.
            with (
                respx.mock(assert_all_mocked=True, assert_all_called=False) as router,
                httpx.Client() as http,
            ):
                try:
                    check(root, router, http)
                except SelfCheckFailed as failure:
                    return str(failure)
                except Exception as error:  # the check reports, it does not crash
                    return f"{check.__name__.strip('_')}: {type(error).__name__}: {error}"
    return None


# -- entry point ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m crashmatrix.reference_agent",
        description="The crashmatrix reference agent with the built-in mock tools.",
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        default=Path(WORLD_WORKSPACE),
        help="the directory the tools work in, named 'workspace' (default: ./workspace)",
    )
    parser.add_argument(
        "--session-id",
        default=os.environ.get("AGENT_SESSION_ID", "demo"),
        help="session file WORKSPACE/.agent_state/session-ID.jsonl (default: $AGENT_SESSION_ID or demo)",
    )
    parser.add_argument("--self-check", action="store_true", help="run the built-in offline check and exit")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.self_check:
        failure = self_check()
        if failure is None:
            print("self-check passed")
            return 0
        print(f"self-check failed: {failure}")
        return 1
    try:
        return interactive(args.workspace, args.session_id)
    except SessionLeased as leased:  # another process is resuming this session (lease.py)
        print(f"error: {leased}", file=sys.stderr)
        return EXIT_LEASED
    except (UsageError, HarnessError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print()
        return 130


if __name__ == "__main__":
    sys.exit(main())
