"""Per-case cost of each kind of agent, against the reference agent's, measured in the same
minutes: prints figures, asserts nothing (named so as not to shadow the OpenAI Agents SDK,
whose package is ``agents``, when run as a script).

    python benchmarks/agent_kinds.py                                  # every built-in kind installed
    python benchmarks/agent_kinds.py --agent langgraph --agent openai-agents --rounds 3
    cd my_project && python /path/to/benchmarks/agent_kinds.py --agent langgraph:my_agent.graph:build

``--agent`` takes a built-in kind's name (``reference``, ``python_agent``, ``seed000_agent``,
``blackbox_agent``, ``langgraph``, ``openai-agents``, ``langgraph_team``, ``agents_sdk_team``:
the examples in this repository) or any
``--agent`` value pytest takes: an adapter YAML, ``package.module:factory``,
``langgraph:package.module:factory``, ``openai-agents:package.module:factory``. Modules import
from the current directory first, as under pytest run from a project's root. The reference
agent is always measured first: every ratio is against its median in the same round.

Each agent runs the same built-in scenario (``send_email/send_once.yaml`` unless
``--scenario``): its clean run (which enumerates the points, and starts the agent's warm fork
server: the "start" figure) and then a case at each crash point the clean run recorded (torn
writes and ``recovery@`` left out: they differ by adapter), one case at a time, lives forked
from a fork server warmed with what the agent needs (``harness.agents.loading.fork_preload``).
Per agent and round it prints the cases, their lives, the cases' wall time, the per-case
median and max, and the ratio of the median to the reference's. ``--rounds N`` measures every
agent N times, alternating, and ends with the median ratio of each (the machine's speed moves
by a quarter from one minute to the next: docs/performance.md).

Target (issue 27): a framework case at most 2.5x a reference case. The load average is
printed before and after: a figure taken with other work on the cores says so.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from crashmatrix.harness.agents.loading import fork_preload
from crashmatrix.harness.core.boundaries import TORN_WRITE
from crashmatrix.harness.errors import CrashmatrixError
from crashmatrix.harness.front.cases import enumerate_points, run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "send_email" / "send_once.yaml"
# name -> (agent spec, the module that must be importable for it to run); YAML paths are
# under ROOT, so that the built-in kinds run from any directory.
BUILTIN: dict[str, tuple[str, str]] = {
    "reference": ("reference", ""),
    "python_agent": (str(ROOT / "examples/python_agent/adapter.yaml"), ""),
    "seed000_agent": (str(ROOT / "examples/seed000_agent/adapter.yaml"), ""),
    "blackbox_agent": (str(ROOT / "examples/blackbox_agent/adapter.yaml"), ""),
    "langgraph": ("langgraph:examples.langgraph_agent.agent:build", "langgraph"),
    "openai-agents": ("openai-agents:examples.openai_agents_agent.agent:build", "agents"),
    # The team's own agent in an adapter YAML (framework:): its tools, world, model client.
    "langgraph_team": (str(ROOT / "examples/langgraph_team/adapter.yaml"), "langgraph"),
    "agents_sdk_team": (str(ROOT / "examples/agents_sdk_team/adapter.yaml"), "agents"),
}


@dataclass(frozen=True, slots=True)
class Kind:
    name: str  # as printed
    spec: str  # the --agent value the harness gets
    needs: str = ""  # a module that must be importable ("" when none)


@dataclass(frozen=True, slots=True)
class Measured:
    start: float  # seconds of the clean run, the fork server's start and warm-up included
    seconds: tuple[float, ...]  # per case
    lives: int

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def kinds(chosen: Sequence[str]) -> list[Kind]:
    """The agents to measure, the reference first (every ratio is against it)."""
    names = list(dict.fromkeys(chosen)) if chosen else list(BUILTIN)
    out = [Kind(name, *BUILTIN[name]) if name in BUILTIN else Kind(name, name) for name in names]
    reference = [k for k in out if k.spec == "reference"] or [Kind("reference", "reference")]
    return [reference[0], *(k for k in out if k.spec != "reference")]


def measure(spec: str, scenario_path: Path, work: Path) -> Measured:
    """The clean case (enumerating the points), then a case at every recorded point."""
    scenario = load_scenario(scenario_path)
    launcher = LifeLauncher("fork", preload=fork_preload(spec), warm=(spec,))
    started = time.perf_counter()
    enum = enumerate_points(scenario, launcher, work / "enumerate", agent=spec)
    start = time.perf_counter() - started
    points = [None, *(p for p in enum.points if p.boundary != TORN_WRITE)]
    seconds: list[float] = []
    lives = 0
    for index, point in enumerate(points):
        started = time.perf_counter()
        result = run_point(scenario, point, launcher, work / f"case-{index}", agent=spec)
        seconds.append(time.perf_counter() - started)
        lives += result.lives
    return Measured(start, tuple(seconds), lives)


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min), {os.cpu_count()} cores"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        help="a built-in kind's name or an --agent value (repeatable); default: every built-in kind",
    )
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    parser.add_argument("--rounds", type=int, default=1, help="measure every agent N times, alternating")
    args = parser.parse_args(argv)
    # Like pytest from a project's root: the team's modules import from the current directory;
    # then the repository's root, for the built-in examples (examples.*).
    sys.path[:0] = [p for p in (os.getcwd(), str(ROOT)) if p not in sys.path]
    chosen = kinds(args.agent)
    scenario = args.scenario.resolve()
    shown = scenario.relative_to(ROOT) if scenario.is_relative_to(ROOT) else scenario
    print(f"scenario: {shown}; {_load()}")
    ratios: dict[str, list[float]] = {}
    # Each agent measured with only the sys.path entries its own loading added: an adapter
    # YAML's load puts its folder first (its sibling modules), and the lives get this
    # process's sys.path; two teams' folders both holding a fixed.py would otherwise give
    # the second agent's lives the first one's module.
    base = list(sys.path)
    own: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="crashmatrix-bench-") as tmp:
        for round_ in range(1, max(1, args.rounds) + 1):
            if args.rounds > 1:
                print(f"round {round_}:")
            reference: float | None = None
            for index, kind in enumerate(chosen):
                if kind.needs and importlib.util.find_spec(kind.needs) is None:
                    print(f"{kind.name}: skipped ({kind.needs} is not installed)")
                    continue
                sys.path[:] = [*own.get(kind.spec, []), *base]
                try:
                    measured = measure(kind.spec, scenario, Path(tmp) / f"round-{round_}" / f"agent-{index}")
                except CrashmatrixError as error:
                    print(f"{kind.name}: not measured ({error})")
                    continue
                finally:
                    own.setdefault(kind.spec, [p for p in sys.path if p not in base])
                    sys.path[:] = base
                ratio = ""
                if kind.spec == "reference":
                    reference = measured.median
                elif reference:
                    ratios.setdefault(kind.name, []).append(measured.median / reference)
                    ratio = f", {measured.median / reference:.1f}x the reference"
                print(
                    f"{kind.name}: {len(measured.seconds)} cases, {measured.lives} lives, "
                    f"wall {sum(measured.seconds):.2f} s (start {measured.start:.2f} s), "
                    f"per case median {measured.median * 1000:.0f} ms, "
                    f"max {max(measured.seconds) * 1000:.0f} ms{ratio}"
                )
    if args.rounds > 1:
        for name, each in ratios.items():
            listed = ", ".join(f"{r:.1f}" for r in each)
            print(
                f"{name}: median {statistics.median(each):.1f}x the reference over {len(each)} rounds ({listed})"
            )
    print(f"after: {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
