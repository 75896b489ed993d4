"""The fork server a test's lives start from: the one ``pytest --agent`` would start.

``collection.launcher_for`` gives a session's lives a server that imported what the agent
needs (``loading.fork_preload``: openai, the agent's SDK) and loaded its adapter once
(``warm``). A test module that builds its own ``LifeLauncher`` with the reference agent's
preload alone makes every life of a foreign agent import those again: memo_agent's lives
took twice as long (issue 31). ``warm_launcher(*agents)`` is the server for all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from crashmatrix.harness.agents.loading import fork_preload
from crashmatrix.harness.lives.injector import LifeLauncher

__all__ = ["warm_launcher"]


def warm_launcher(*agents: str | Path, preload: Sequence[str] = ()) -> LifeLauncher:
    """A forking launcher preloading what each of ``agents`` needs (in order, once each) and
    ``preload``, with their adapters warm: the lives of every agent named fork warm."""
    names = [str(agent) for agent in agents]
    modules = list(preload)
    for name in names:
        own = fork_preload(name)
        # The first list as it is (a module in it twice included): for one agent, the list
        # ``launcher_for`` gives ``pytest --agent``, so both share one server (shared by list).
        modules += [module for module in own if module not in modules] if modules else own
    return LifeLauncher("fork", preload=modules, warm=names)
