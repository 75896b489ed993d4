"""Imported by the fork server (its preload list): run one throwaway life in-process so that
every life forked from it starts warm.

A forked life is always the first life of its process. Importing modules is not enough:
openai builds its request transforms, pydantic its validators, typing its caches, respx its
routes, lazily on first use -- about 100 ms that every life would pay again. One clean life
here pays it once, before any fork; children inherit the warm caches copy-on-write.

The throwaway life runs the reference agent on a two-call scenario in a temporary directory
and leaves nothing behind (no thread, no open file, no process). If it fails, lives are only
slower, never wrong, so the failure is swallowed. Then, still before any fork: the argument
validators of every built-in tool are built (``mock_tools.toolbox.validator_for``). Before
it, the lives' respx router is started for good, with the HTTP client lives get
(``harness.lives.life.mocks().keep_started()``), so that a forked life neither builds validators, nor
patches httpx, nor builds the HTTP client it is given.

A server prepared for a framework agent (``--agent=langgraph:...``, ``openai-agents:...``)
then runs one life of that agent the same way (``warm_framework``, called by the server after
its preloads, this module last among them; a server forked from another that imported this
module calls it too, for its own agents): LangChain, LangGraph and
the Agents SDK build much on a life's first turn (the adapter's modules imported inside
``run_life``, pydantic models and JSON schemas, typing caches, the checkpoint serializer),
which every life forked before it paid again. Such an adapter's load check has already run
the team's factory in this process, so the life adds none of the team's code that was not
here. A kind-2 agent, or a framework agent declared in an adapter YAML, gets none: its module
runs in the life, where it reads the life's environment at import (``harness.agents.preload``).

Every fork server imports this module; nothing else should (it would leave httpx patched).
"""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path

from crashmatrix.harness.lives.janitor import temporary_directory
from crashmatrix.harness.lives.life import mocks
from crashmatrix.harness.lives.server_state import in_server

__all__ = ["throwaway_life", "warm_framework"]

_SCENARIO = """\
name: warmup
tools: [write_file, send_email]
turns: ["warm up"]
model:
  - when: {role: user}
    reply:
      tool_calls:
        - {id: call_w, name: write_file, arguments: {path: w.txt, content: w}}
        - {id: call_e, name: send_email, arguments: {to: w@example.com, subject: w, body: w}}
  - when: {role: tool}
    reply: {content: "warm"}
"""


def throwaway_life(agent: str) -> None:
    """One clean life of ``agent`` on the two-call scenario, in this process, in a temporary
    directory removed after it (``janitor``: even if the server is killed meanwhile). Raises
    what the life raises."""
    from crashmatrix.harness.input.scenario import load_scenario
    from crashmatrix.harness.lives.casedir import fresh_case
    from crashmatrix.harness.lives.life import LifeSpec, run_life
    from crashmatrix.harness.lives.tracer import Tracer

    # Removed when the life ends, and also when the server is SIGKILLed during it (the
    # harness stopping early: a SIGTERM, a Ctrl-C, a CI timeout).
    with temporary_directory("crashmatrix-warmup-") as tmp:
        path = Path(tmp) / "warmup.yaml"
        path.write_text(_SCENARIO, encoding="utf-8")
        scenario = load_scenario(path)
        case_dir = Path(tmp) / "case"
        fresh_case(case_dir, scenario)  # no template: the server dies without exit handlers
        spec = LifeSpec(str(case_dir), scenario, agent, 1)
        run_life(spec, Tracer(case_dir / "trace.jsonl", 1, None))
    # Its objects (the worlds' open connections among them) go now, not in some later
    # collection in a life.
    gc.collect()


def warm_framework(agent: str) -> None:
    """One throwaway life of a framework agent (``langgraph:...``, ``openai-agents:...``);
    nothing for any other kind. Raises what the life raises."""
    from crashmatrix.harness.agents.loading import FRAMEWORKS

    name, sep, _ = agent.partition(":")
    if sep and name in FRAMEWORKS:
        throwaway_life(agent)


def _warm() -> None:
    throwaway_life("reference")
    # Every built-in tool's argument validator, not only the two the throwaway life used.
    from crashmatrix.harness.input.contract_files import load_contracts
    from crashmatrix.mock_tools.registry import CONTRACTS_DIR
    from crashmatrix.mock_tools.toolbox import validator_for

    for contract in load_contracts(sorted(CONTRACTS_DIR.glob("*.yaml"))).values():
        if contract.parameters:
            validator_for(contract.parameters)


if in_server():
    # httpx is intercepted before any fork: lives never patch it themselves, nor build
    # an HTTP client (life._Mocks).
    mocks().keep_started()
with contextlib.suppress(Exception):  # a cold life is slower, not wrong
    _warm()
gc.collect()
