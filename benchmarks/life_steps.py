"""Where a forked life's time goes: prints figures, asserts nothing.

    python benchmarks/life_steps.py                                   # create_order/keyed_once
    python benchmarks/life_steps.py scenarios/write_file/write_file_recovery.yaml --lives 30

One clean life at a time, forked from the same warm fork server the matrix uses:

* each step of the life, timed and its page faults counted inside the child (wrappers add
  faults of their own, so the column compares steps, not totals);
* the whole life with no wrapper: page faults since the fork and CPU time, beside a child
  that does nothing (what the floor's round trip pays);
* the same life run twice in one child: the second pays no copy-on-write for what the
  first touched;
* what one copy-on-write fault costs on this machine (a forked child writing one byte per
  page of a buffer its parent filled).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.casedir import prepare_case
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.lives.life import LifeSpec, life_main, run_life
from crashmatrix.harness.lives.tracer import Tracer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this module by its importable name: benchmarks.life_steps
# The children's targets are this module's functions: preloaded, so no child pays for importing
# it (before, the do-nothing child's import of this module was counted as the fork's faults).
PRELOAD = ["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox", "benchmarks.life_steps"]
DEFAULT = ROOT / "scenarios" / "create_order" / "keyed_once.yaml"


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt  # since the fork, in a child


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _dump(out: str, data: object) -> None:
    Path(out).write_text(json.dumps(data), encoding="utf-8")


# ------------------------------------------------------------------ targets run in the child
def _steps(spec: LifeSpec, out: str) -> None:
    from crashmatrix.harness.agents.reference import ReferenceAdapter
    from crashmatrix.harness.session_file import SessionWriter
    from crashmatrix.mock_tools.toolbox import MockToolbox
    from crashmatrix.reference_agent.model import OpenAIChatModel

    totals: dict[str, list[float]] = {}

    def wrap(owner: Any, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started, faults = time.perf_counter(), _faults()
            try:
                return original(*args, **kwargs)
            finally:
                entry = totals.setdefault(label, [0.0, 0.0, 0.0])
                entry[0] += time.perf_counter() - started
                entry[1] += _faults() - faults
                entry[2] += 1

        setattr(owner, name, timed)

    wrap(ReferenceAdapter, "build", "building the agent")
    wrap(OpenAIChatModel, "complete", "model requests")
    wrap(MockToolbox, "execute", "tool calls")
    wrap(SessionWriter, "append", "session appends (fsynced)")
    started, faults = time.perf_counter(), _faults()
    run_life(spec, Tracer(Path(spec.case_dir) / "trace.jsonl", 1, None))
    totals["whole life (wrapped)"] = [time.perf_counter() - started, _faults() - faults, 1]
    _dump(out, totals)


def _whole(spec: LifeSpec, out: str) -> None:
    faults, cpu = _faults(), _cpu()
    life_main(spec)
    _dump(out, {"before": faults, "life": _faults() - faults, "cpu": _cpu() - cpu})


def _nothing(out: str) -> None:
    _dump(out, {"before": _faults()})


def _twice(first: LifeSpec, second: LifeSpec, out: str) -> None:
    times = []
    for spec in (first, second):
        started = time.perf_counter()
        run_life(spec, Tracer(Path(spec.case_dir) / "trace.jsonl", 1, None))
        times.append(time.perf_counter() - started)
    _dump(out, times)


# ------------------------------------------------------------------ the parent
def _cow_fault_us(pages: int = 20000) -> float:
    buffer = bytearray(4096 * pages)
    for offset in range(0, len(buffer), 4096):
        buffer[offset] = 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        started = time.perf_counter()
        for offset in range(0, len(buffer), 4096):
            buffer[offset] = 2
        os.write(write, str(time.perf_counter() - started).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    took = float(os.read(read, 64))
    os.close(read)
    os.close(write)
    # Minus the same loop over pages already copied (the Python loop's own cost).
    started = time.perf_counter()
    for offset in range(0, len(buffer), 4096):
        buffer[offset] = 3
    return (took - (time.perf_counter() - started)) / pages * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenario", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--lives", type=int, default=20, help="lives per figure (the first 3 are dropped)")
    args = parser.parse_args(argv)
    scenario = load_scenario(args.scenario)
    launcher = LifeLauncher("fork", preload=PRELOAD)
    server = launcher.server
    assert server is not None
    work = Path(tempfile.mkdtemp(prefix="crashmatrix-steps-"))
    out = str(work / "out.json")

    # The targets by their importable name: run as a script this module is ``__main__``,
    # which the fork server's children cannot unpickle from.
    import benchmarks.life_steps as importable

    def runs(target: Callable[..., None], specs: int) -> list[Any]:
        target = getattr(importable, target.__name__)
        results = []
        for index in range(args.lives + 3):
            lives = []
            for n in range(specs):
                case = work / f"{target.__name__}-{index}-{n}"
                prepare_case(case, scenario)
                lives.append(LifeSpec(str(case), scenario, "reference", 1))
            server.run(target, (*lives, out), deadline=30)
            results.append(json.loads(Path(out).read_text(encoding="utf-8")))
        return results[3:]

    print(f"{args.scenario.name}, one clean life forked from the warm server, medians of {args.lives}:")
    steps = runs(_steps, 1)
    for label in steps[0]:
        ms = statistics.median(r[label][0] for r in steps) * 1000
        faults = statistics.median(r[label][1] for r in steps)
        print(f"  {label:28s} {ms:6.1f} ms {faults:6.0f} page faults  (x{steps[0][label][2]:.0f})")
    whole = runs(_whole, 1)
    nothing = runs(_nothing, 0)
    before = statistics.median(r["before"] for r in whole)
    life = statistics.median(r["life"] for r in whole)
    print(
        f"  no wrappers: {before:.0f} page faults from the fork to the life, {life:.0f} in it,"
        f" {statistics.median(r['cpu'] for r in whole) * 1000:.1f} ms CPU"
    )
    print(f"  a child that does nothing: {statistics.median(r['before'] for r in nothing):.0f} page faults")
    twice = runs(_twice, 2)
    print(
        f"  the same life twice in one child: {statistics.median(t[0] for t in twice) * 1000:.1f} ms,"
        f" then {statistics.median(t[1] for t in twice) * 1000:.1f} ms"
    )
    print(f"one copy-on-write fault on this machine: {_cow_fault_us():.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
