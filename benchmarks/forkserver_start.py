"""Where a fork server's start goes: prints figures, asserts nothing.

    python benchmarks/forkserver_start.py                          # reference + examples/python_agent
    python benchmarks/forkserver_start.py --agent tests/golden/mcp/adapter.yaml --runs 5

For each agent, two measures (medians of ``--runs``):

* **Stages** (CPU time, less noisy than wall time on a shared machine), in a fresh interpreter that prepares itself the way ``forkserver.serve`` does,
  timing each step: the interpreter's start (a bare ``python -c pass``, measured apart),
  importing the fork server's module, each module of the preload list in the server's order
  (each import pays only what the ones before it did not), ``warm_agent.warm(agent)``, and
  ``harness.lives.warmup`` statement by statement: starting the lives' respx router, the
  reference agent's throwaway life, the built-in tools' validators, a framework agent's life.
* **From the harness's side**: a new ``ForkServer`` for the agent's key and its first
  request (a child that does nothing), i.e. what the first life of a run waits for beyond
  its own work; then a second request on the warm server.
* **A second server, cloned or started** (``ForkServer._clone``): with the reference agent's
  server running, a new server for the agent, its start and first request (wall) and the CPU
  the new server process used to get there, forked from the running one and, with
  ``CRASHMATRIX_SERVER_CLONES=0``, as a new interpreter.
* **Whether the warm-up life is repaid**: a reference agent's server with and without
  ``harness.lives.warmup``, its start, its first life and its median life.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_AGENTS = ["reference", str(ROOT / "examples" / "python_agent" / "adapter.yaml")]


def _nothing() -> None:
    pass


# ------------------------------------------------------------------ run in a fresh interpreter
def _stages(agent: str, preload: list[str]) -> None:  # pragma: no cover - a child process
    started = time.process_time()
    figures: list[tuple[str, float]] = []

    def mark(name: str, since: float) -> float:
        now = time.process_time()
        figures.append((name, now - since))
        return now

    from crashmatrix.harness.lives import forkserver, server_state

    at = mark("import crashmatrix.harness.lives.forkserver", started)
    assert forkserver.in_server is server_state.in_server
    server_state.serving((agent,))
    for imported in preload[:-1]:
        try:
            __import__(imported)
        except Exception as error:  # as the server: a failing preload is only slower lives
            figures.append((f"import {imported} FAILED: {error!r}", 0.0))
        at = mark(f"import {imported}", at)
    from crashmatrix.harness.lives import warm_agent

    at = mark("import crashmatrix.harness.lives.warm_agent", at)
    from crashmatrix.harness.agents.loading import adapter_for

    adapter: object = None
    try:
        adapter = adapter_for(agent)
    except Exception as error:
        figures.append((f"warm: adapter_for FAILED: {error!r}", 0.0))
    at = mark(f"warm({agent!r}): adapter_for", at)
    # As warm() does (an adapter whose lives use only the harness's client gets no more).
    if getattr(adapter, "own_http_client", True) is not False:
        for step in ("share_default_tls", "warm_openai", "warm_async_http"):
            getattr(warm_agent, step)()
            at = mark(f"warm({agent!r}): {step}", at)
    # harness.lives.warmup, one top-level statement at a time (its work runs at import).
    name = preload[-1]
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        code = compile(ast.Module(body=[node], type_ignores=[]), spec.origin, "exec")
        if isinstance(node, ast.FunctionDef) or not isinstance(node, ast.With | ast.If | ast.For | ast.Expr):
            exec(code, module.__dict__)
            continue
        if isinstance(node, ast.With):  # _warm(): the throwaway life, then the validators
            original = module.__dict__["throwaway_life"]
            lap: dict[str, float] = {}

            def timed(agent: str, original: object = original, lap: dict[str, float] = lap) -> None:
                begun = time.process_time()
                try:
                    original(agent)  # type: ignore[operator]
                finally:
                    lap["life"] = time.process_time() - begun

            module.__dict__["throwaway_life"] = timed
            exec(code, module.__dict__)
            module.__dict__["throwaway_life"] = original
            now = time.process_time()
            figures.append(("warmup: the reference agent's throwaway life", lap.get("life", 0.0)))
            figures.append(("warmup: the built-in tools' validators", now - at - lap.get("life", 0.0)))
            at = now
            continue
        exec(code, module.__dict__)
        label = ast.unparse(node).splitlines()[0][:60]
        at = mark(f"warmup: {label}", at)
    for warmed in server_state.warming():  # as forkserver._prepare does after the preloads
        try:
            module.__dict__["warm_framework"](warmed)
        except Exception as error:
            figures.append((f"warm_framework FAILED: {error!r}", 0.0))
        at = mark(f"warm_framework({warmed!r}): a framework agent's throwaway life", at)
    figures.append(("total in the server (after the interpreter's start)", time.process_time() - started))
    print(json.dumps(figures))


def _first_request(agent: str) -> None:  # pragma: no cover - a child process
    from crashmatrix.harness.agents.loading import fork_preload
    from crashmatrix.harness.lives.injector import LifeLauncher

    launcher = LifeLauncher("fork", preload=fork_preload(agent), warm=(agent,))
    server = launcher.server
    assert server is not None
    started = time.perf_counter()
    server.run(_nothing, (), deadline=60.0)
    first = time.perf_counter() - started
    started = time.perf_counter()
    server.run(_nothing, (), deadline=60.0)
    second = time.perf_counter() - started
    print(json.dumps([("new server: start + first request", first), ("warm server: a request", second)]))


def _server_cpu(pid: int) -> float:
    """CPU seconds a process used itself (not its children), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _second_server(agent: str) -> None:  # pragma: no cover - a child process
    """The reference agent's server running, then a new one for ``agent``: cloned from it,
    or a new interpreter (``CRASHMATRIX_SERVER_CLONES=0``, set by the caller)."""
    from crashmatrix.harness.agents.loading import fork_preload
    from crashmatrix.harness.lives.injector import LifeLauncher

    base = LifeLauncher("fork", preload=fork_preload("reference"), warm=("reference",)).server
    assert base is not None
    base.run(_nothing, (), deadline=60.0)
    server = LifeLauncher("fork", preload=fork_preload(agent), warm=(agent,)).server
    assert server is not None and server is not base
    started = time.perf_counter()
    server.run(_nothing, (), deadline=60.0)
    first = time.perf_counter() - started
    process = server._process
    assert process is not None
    how = "cloned" if os.environ.get("CRASHMATRIX_SERVER_CLONES") != "0" else "a new interpreter"
    print(
        json.dumps(
            [
                (f"second server, {how}: start + first request (wall)", first),
                (f"second server, {how}: its CPU", _server_cpu(process.pid)),
            ]
        )
    )


def _warmup_repaid(lives: int) -> None:  # pragma: no cover - a child process
    """A server for the reference agent with and without ``harness.lives.warmup`` (the last
    preload): its start and first request, then ``lives`` clean lives of keyed_once each."""
    import tempfile

    from crashmatrix.harness.agents.loading import fork_preload
    from crashmatrix.harness.input.scenario import load_scenario
    from crashmatrix.harness.lives.casedir import prepare_case
    from crashmatrix.harness.lives.forkserver import ForkServer
    from crashmatrix.harness.lives.injector import PRELOAD
    from crashmatrix.harness.lives.life import LifeSpec, life_main

    scenario = load_scenario(ROOT / "scenarios" / "create_order" / "keyed_once.yaml")
    figures: list[tuple[str, float]] = []
    for warm in (True, False):
        name = "with the warm-up life" if warm else "without it"
        server = ForkServer([*PRELOAD[:-1], *fork_preload("reference"), *PRELOAD[-1:] * warm], ("reference",))
        started = time.perf_counter()
        server.run(_nothing, (), deadline=60.0)
        figures.append((f"{name}: start + first request", time.perf_counter() - started))
        times = []
        with tempfile.TemporaryDirectory() as tmp:
            for life in range(lives):
                case = Path(tmp) / str(life)
                prepare_case(case, scenario)
                started = time.perf_counter()
                server.run(life_main, (LifeSpec(str(case), scenario, "reference", 1),), deadline=60.0)
                times.append(time.perf_counter() - started)
        server.stop()
        figures.append((f"{name}: first life", times[0]))
        figures.append((f"{name}: median life", statistics.median(times)))
    print(json.dumps(figures))


# ------------------------------------------------------------------ the benchmark's process
def _server_preload(agent: str) -> list[str]:
    """The preload list ``LifeLauncher`` gives the server for ``agent``."""
    from crashmatrix.harness.agents.loading import fork_preload
    from crashmatrix.harness.lives.injector import PRELOAD

    return [*PRELOAD[:-1], *fork_preload(agent), PRELOAD[-1]]


def _child(what: str, agent: str, env: dict[str, str] | None = None) -> list[tuple[str, float]]:
    command = [sys.executable, str(Path(__file__).resolve()), f"--child-{what}"]
    command += [agent] if agent else []
    if what == "stages":
        command.append(json.dumps(_server_preload(agent)))
    out = subprocess.run(
        command, check=True, capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})}
    ).stdout
    return [(name, seconds) for name, seconds in json.loads(out.strip().splitlines()[-1])]


def _interpreter(runs: int) -> tuple[float, float]:
    """A bare interpreter's start and exit: wall time, and the CPU time it used."""
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(times), statistics.median(cpu)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", action="append", help="an --agent spec (repeatable)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child-stages", metavar="AGENT", help=argparse.SUPPRESS)
    parser.add_argument("preload", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument("--child-first", metavar="AGENT", help=argparse.SUPPRESS)
    parser.add_argument("--child-repaid", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-second", metavar="AGENT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_second:
        _second_server(args.child_second)
        return
    if args.child_stages:
        _stages(args.child_stages, json.loads(args.preload))
        return
    if args.child_first:
        _first_request(args.child_first)
        return
    if args.child_repaid:
        _warmup_repaid(8)
        return
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; medians of {args.runs} runs (ms)"
    )
    wall, cpu = _interpreter(args.runs)
    print(f"  {'a bare interpreter, python -c pass (wall / CPU)':<66} {wall * 1000:8.1f} / {cpu * 1000:.1f}")
    print("stages: CPU time in the server; new server and request: wall time")
    for agent in args.agent or DEFAULT_AGENTS:
        print(f"\nagent {agent}")
        samples: dict[str, list[float]] = {}
        for _ in range(args.runs):
            for name, seconds in _child("stages", agent) + _child("first", agent):
                samples.setdefault(name, []).append(seconds)
            if agent != "reference":  # alternating, so both see the same load
                for clones in ("1", "0"):
                    for name, seconds in _child("second", agent, {"CRASHMATRIX_SERVER_CLONES": clones}):
                        samples.setdefault(name, []).append(seconds)
        for name, values in samples.items():
            print(f"  {name:<66} {statistics.median(values) * 1000:8.1f}")
    print("\nis the warm-up life repaid? the reference agent, create_order/keyed_once, 8 lives (wall)")
    samples = {}
    for _ in range(args.runs):
        for name, seconds in _child("repaid", ""):
            samples.setdefault(name, []).append(seconds)
    for name, values in samples.items():
        print(f"  {name:<66} {statistics.median(values) * 1000:8.1f}")


if __name__ == "__main__":
    main()
