"""Per-case cost of each kind of agent, in one run: prints figures, asserts nothing (named so as
not to shadow the OpenAI Agents SDK, whose package is ``agents``, when run as a script).

    python benchmarks/agent_kinds.py                        # every agent below that is installed
    python benchmarks/agent_kinds.py --agent reference --agent examples/python_agent/adapter.yaml

Each agent runs the same built-in scenario (``send_email/send_once.yaml`` unless
``--scenario``): its clean case and a case at each crash point its clean run records (torn
writes and recovery@ left out: they differ by adapter), one case at a time, lives forked
from a fork server warmed with what the agent needs (``harness.agents.loading.fork_preload``).
The figure is the per-case median and its ratio to the reference agent's, measured in the
same minutes (issue 16's target: a framework or kind-2 case at most 3x the reference's).

Default agents: the reference, the kind-2 examples (python_agent, seed000_agent), the kind-3
black box, and each framework example whose framework is installed
(``pip install -e '.[langgraph,openai-agents]'``).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from crashmatrix.harness.agents.loading import fork_preload
from crashmatrix.harness.core.boundaries import TORN_WRITE
from crashmatrix.harness.errors import CrashmatrixError
from crashmatrix.harness.front.cases import enumerate_points, run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "send_email" / "send_once.yaml"
# (agent spec, the module that must be importable for it to run)
AGENTS: tuple[tuple[str, str], ...] = (
    ("reference", ""),
    ("examples/python_agent/adapter.yaml", ""),
    ("examples/seed000_agent/adapter.yaml", ""),
    ("examples/blackbox_agent/adapter.yaml", ""),
    ("langgraph:examples.langgraph_agent.agent:build", "langgraph"),
    ("openai-agents:examples.openai_agents_agent.agent:build", "agents"),
)


def _available(spec: str, needs: str) -> str:
    """Why ``spec`` cannot run here ("" when it can)."""
    if needs and importlib.util.find_spec(needs) is None:
        return f"{needs} is not installed"
    if spec.endswith(".yaml") and not (ROOT / spec).exists():
        return f"{spec} does not exist"
    if ":" in spec and spec.count(":") == 2:
        module = spec.split(":")[1]
        if (
            importlib.util.find_spec(module.split(".")[0]) is None
            or not (ROOT / Path(*module.split(".")).with_suffix(".py")).exists()
        ):
            return f"{module} does not exist"
    return ""


def measure(spec: str, scenario_path: Path, work: Path) -> tuple[list[float], int]:
    """Seconds per case and lives, for the clean case and every recorded point."""
    scenario = load_scenario(scenario_path)
    launcher = LifeLauncher("fork", preload=fork_preload(spec), warm=(spec,))
    enum = enumerate_points(scenario, launcher, work / "enumerate", agent=spec)
    points = [None, *(p for p in enum.points if p.boundary != TORN_WRITE)]
    seconds: list[float] = []
    lives = 0
    for index, point in enumerate(points):
        started = time.perf_counter()
        result = run_point(scenario, point, launcher, work / f"case-{index}", agent=spec)
        seconds.append(time.perf_counter() - started)
        lives += result.lives
    return seconds, lives


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agent", action="append", default=[], help="an --agent value (repeatable)")
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # examples.* import as they do under pytest from the repo root
    chosen = [(a, "") for a in args.agent] if args.agent else list(AGENTS)
    if all(spec != "reference" for spec, _ in chosen):
        chosen.insert(0, ("reference", ""))
    print(
        f"scenario: {args.scenario.relative_to(ROOT) if args.scenario.is_relative_to(ROOT) else args.scenario}"
    )
    reference: float | None = None
    with tempfile.TemporaryDirectory(prefix="crashmatrix-bench-") as tmp:
        for index, (spec, needs) in enumerate(chosen):
            why = _available(spec, needs)
            if why:
                print(f"{spec}: skipped ({why})")
                continue
            try:
                seconds, lives = measure(spec, args.scenario, Path(tmp) / f"agent-{index}")
            except CrashmatrixError as error:
                print(f"{spec}: not measured ({error})")
                continue
            median = statistics.median(seconds)
            reference = median if spec == "reference" else reference
            ratio = f", {median / reference:.1f}x the reference" if reference and spec != "reference" else ""
            print(
                f"{spec}: {len(seconds)} cases, {lives} lives, per case median {median * 1000:.0f} ms, "
                f"max {max(seconds) * 1000:.0f} ms{ratio}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
