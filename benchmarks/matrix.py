"""Benchmark the crash matrix: prints figures, asserts nothing (machines are shared and noisy).

    python benchmarks/matrix.py                 # everything, ~2-4 minutes on 2 cores
    python benchmarks/matrix.py --quick         # a few scenarios only
    python benchmarks/matrix.py --no-snapshots  # each first crash a life killed at its point

Figures:
* the built-in matrix (every scenario's clean case and crash points, no recovery@ items),
  run case by case in this process with forked lives: cases, lives (the lives actually
  started, per case), wall time, cases per second, per-case median and p95, peak memory,
  and this process's RSS before, halfway and after (the second half's growth is what
  accumulates per case). By default as the pytest plugin runs it (issue 31): each
  scenario's clean case is one clean life that leaves a first crash at every point it
  passes (``harness.lives.snapshots``), and each point's case starts from its snapshot;
  with ``--no-snapshots`` each case runs its own first life up to its crash point;
* the same sample of cases with forked lives and with a fresh interpreter per life
  (``--isolation=spawn``), and the ratio between them, from this one run;
* one clean life run in this process (no fork): the agent's own work per life;
* the floor on this machine, measured on the same cases across the same minutes: a fork
  server round trip with the agent's modules imported (one after each case; the median)
  per life, plus the fsyncs a case makes (every one, in its lives and in the harness,
  timed where it happens; the median case's), and how far the per-case median is from it;
* optionally (``--memory``) the matrix again under tracemalloc: how much the Python heap
  grew over each half;
* optionally (``--pytest``) the wall time of ``pytest scenarios/ -n 2`` as CI runs it and
  with ``--no-snapshots``, in the same minutes, with the peak RSS of its controller and of
  each worker (and each one's RSS after collection and at the end: flat or not); with
  ``--power-column`` also without the power column (``--no-power-loss``);
* optionally (``--ci-step``) CI's test step: the README's test command, ``pytest tests
  scenarios -n 2``, as ``.ci/run`` runs it (case directories on ``/dev/shm`` where it is a
  tmpfs), its wall time against issue 31's 240 s and the CPU every process used meanwhile
  (``/proc/stat``: the whole machine's, so read it on a quiet one; the load is printed).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.front.cases import enumerate_points, run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.first_crash import FirstCrashes
from crashmatrix.harness.lives.injector import LifeLauncher

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for the sibling script below, not for crashmatrix (installed)
from benchmarks import fsync_probe  # noqa: E402

PRELOAD = ["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Counted:
    """The lives a launcher started (each ``run`` is one forked life)."""

    def __init__(self, launcher: LifeLauncher) -> None:
        self.lives = 0
        run = launcher.run

        def counted(*args: object, **kwargs: object) -> object:
            self.lives += 1
            return run(*args, **kwargs)  # type: ignore[arg-type]

        launcher.run = counted  # type: ignore[method-assign]


def _cases(
    paths: Sequence[Path], launcher: LifeLauncher, work: Path, shared: FirstCrashes | None = None
) -> tuple[list[tuple[Scenario, CrashPoint | None]], list[float]]:
    """Every scenario's cases, and with ``shared`` the seconds of each scenario's clean case:
    its one clean life (the enumeration), which leaves every point's first crash."""
    cases: list[tuple[Scenario, CrashPoint | None]] = []
    cleans: list[float] = []
    for index, path in enumerate(paths):
        scenario = load_scenario(path)
        started = time.perf_counter()
        enum = enumerate_points(scenario, launcher, work / f"enum-{index}", shared=shared)
        if shared is not None:
            cleans.append(time.perf_counter() - started)  # the clean case is this run
        else:
            cases.append((scenario, None))
        cases += [(scenario, p) for p in enum.points if scenario.covers(p)]
    return cases, cleans


@dataclass
class Floor:
    """What the floor is measured from, case by case (see ``_run``)."""

    round_trips: list[float] = field(default_factory=list)
    fsyncs: list[int] = field(default_factory=list)
    fsync_seconds: list[float] = field(default_factory=list)
    # The probe's log, read as it grows: each case's fsyncs are the lines added since the
    # last read (every life has ended by then, so no line is half written).
    log: TextIO | None = None


def _run(
    cases: Sequence[tuple[Scenario, CrashPoint | None]],
    launcher: LifeLauncher,
    work: Path,
    floor: Floor | None = None,
    shared: FirstCrashes | None = None,
) -> tuple[list[float], int, int]:
    """Run the cases one at a time. With ``floor``, after each case: the fsyncs it made
    (every one, in its lives and in this process, timed where it happened by
    ``fsync_probe``, which the launcher must preload) and one bare round trip through the
    lives' fork server (a child that does nothing). The floor is then measured on the
    same cases and across the same minutes, whatever the machine's drift."""
    seconds: list[float] = []
    lives = failed = 0
    for index, (scenario, point) in enumerate(cases):
        started = time.perf_counter()
        result = run_point(scenario, point, launcher, work / f"c{index}", shared=shared)
        seconds.append(time.perf_counter() - started)
        lives += result.lives
        failed += not result.passed
        if floor is not None and floor.log is not None and launcher.server is not None:
            took = [float(line) for line in floor.log.read().split()]
            floor.fsyncs.append(len(took))
            floor.fsync_seconds.append(sum(took))
            started = time.perf_counter()
            launcher.server.run(os.getpid, (), deadline=30)
            floor.round_trips.append(time.perf_counter() - started)
    return seconds, lives, failed


def _python_heap(
    cases: Sequence[tuple[Scenario, CrashPoint | None]], launcher: LifeLauncher, work: Path
) -> tuple[int, int]:
    """The same halves again under ``tracemalloc``: bytes the Python heap grew by in each
    (RSS also moves with the allocator's fragmentation and SQLite's own memory)."""
    import gc
    import tracemalloc

    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        _run(cases[::2], launcher, work / "heap-1")
        gc.collect()
        half = tracemalloc.get_traced_memory()[0]
        _run(cases[1::2], launcher, work / "heap-2")
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return half - before, after - half


def _warm_life(scenario: Scenario, work: Path, rounds: int = 30) -> float:
    """Median of one clean life run in this process (no fork): the agent's own work, which
    a forked life pays on top of the floor."""
    from crashmatrix.harness.lives.casedir import prepare_case
    from crashmatrix.harness.lives.life import LifeSpec, run_life
    from crashmatrix.harness.lives.tracer import Tracer

    times: list[float] = []
    for index in range(rounds + 3):  # the first few pay first-use costs
        case = work / f"warm-{index}"
        prepare_case(case, scenario)
        started = time.perf_counter()
        run_life(LifeSpec(str(case), scenario, "reference", 1), Tracer(case / "trace.jsonl", 1, None))
        times.append(time.perf_counter() - started)
    return statistics.median(times[3:])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="three scenarios only")
    parser.add_argument("--spawn-sample", type=int, default=12, help="cases run both forked and spawned")
    parser.add_argument("--pytest", action="store_true", help="also time `pytest scenarios/ -n 2`")
    parser.add_argument(
        "--no-snapshots", action="store_true", help="each first crash a life killed at its point (as before)"
    )
    parser.add_argument(
        "--power-column", action="store_true", help="with --pytest: also time it with --no-power-loss"
    )
    parser.add_argument(
        "--ci-step",
        action="store_true",
        help="also time CI's test step, `pytest tests scenarios -n 2` (~8-10 min on 2 cores)",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="also run the matrix again under tracemalloc (Python heap growth)",
    )
    args = parser.parse_args(argv)

    paths = sorted(
        p
        for p in (ROOT / "scenarios").rglob("*.yaml")
        if "contracts" not in p.relative_to(ROOT / "scenarios").parts
    )
    if args.quick:
        paths = paths[:3]
    work = Path(tempfile.mkdtemp(prefix="crashmatrix-bench-"))
    # Every fsync of the lives is timed (``fsync_probe``, preloaded by their fork server and
    # installed here): one small append per fsync, ~0.005 ms against a case's ~70 ms.
    log_path = work / "fsyncs.log"
    os.environ[fsync_probe.LOG_VARIABLE] = str(log_path)
    fork = LifeLauncher("fork", preload=[*PRELOAD, "benchmarks.fsync_probe"])
    assert fork.server is not None
    fork.server.run(os.getpid, (), deadline=30)  # started: its own warm-up's syncs are no case's
    log_path.write_bytes(b"")
    fsync_probe.install(str(log_path))
    log = log_path.open(encoding="utf-8")

    counted = Counted(fork)
    shared = None if args.no_snapshots else FirstCrashes(work / "first-crashes", snapshots=True)
    started = time.perf_counter()
    cases, cleans = _cases(paths, fork, work / "enumerate", shared)
    enumerate_s = time.perf_counter() - started
    if shared is not None:
        # Point cases only: no other item starts from a point's first crash, so each case
        # resumes from its snapshot in its own directory, as under pytest (``point_run``).
        for scenario, point in cases:
            if point is not None:
                shared.alone(scenario, point)
    log.read()  # the enumeration's syncs: no case's (with snapshots, the clean cases')
    enumeration_lives = counted.lives
    rss_before = _rss_kib()
    started = time.perf_counter()
    measured = Floor(log=log)
    # In two halves, every other case each, so that both meet (nearly) every scenario: the
    # first pays the one-time costs (a template per scenario, first-use caches), and what
    # the second adds is what accumulates per case.
    seconds, lives, failed = _run(cases[::2], fork, work / "fork-1", measured, shared)
    rss_half = _rss_kib()
    more = _run(cases[1::2], fork, work / "fork-2", measured, shared)
    seconds, lives, failed = seconds + more[0], lives + more[1], failed + more[2]
    # The lives actually started, not those a case's record names (a point's case names
    # the first crash it starts from, which its snapshot made without a life of its own).
    lives = counted.lives - enumeration_lives
    if shared is not None:
        seconds += cleans  # each scenario's clean case: its one clean life, snapshots and all
        lives += enumeration_lives
        cases += [(load_scenario(p), None) for p in paths]
        wall_extra = enumerate_s  # the fsync figures below are the point cases'
    else:
        wall_extra = 0.0
    fsync_probe.uninstall()  # the lives' server keeps its probe; nothing else needs one
    log.close()
    del os.environ[fsync_probe.LOG_VARIABLE]
    wall = time.perf_counter() - started + wall_extra
    rss_after = _rss_kib()
    median, p95 = statistics.median(seconds), _pct(seconds, 0.95)
    how = "first crashes from each clean life's snapshots" if shared else "--no-snapshots"
    print(
        f"matrix ({how}): {len(paths)} scenarios, {len(cases)} cases, {lives} lives started, {failed} failed"
    )
    print(f"  lives per case: {lives / len(cases):.2f} (target at most 1.25)")
    print(
        f"  enumeration (one clean run per scenario): {enumerate_s:.1f} s"
        + (", the clean cases themselves (in the wall time below)" if shared else ", not a case")
    )
    print(f"  forked lives, one case at a time: {wall:.1f} s, {len(cases) / wall:.1f} cases/s")
    print(
        f"  per case: median {median * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms; per life {wall / lives * 1000:.0f} ms"
    )
    print(
        f"  RSS of this process: {rss_before / 1024:.1f} MiB before the cases, {rss_half / 1024:.1f} MiB"
        f" after the first half, {rss_after / 1024:.1f} MiB after the second"
    )

    step = max(1, len(cases) // args.spawn_sample)
    sample = cases[::step][: args.spawn_sample]
    fork_s, fork_lives, _ = _run(sample, fork, work / "sample-fork")  # each case whole, both ways
    spawn_s, spawn_lives, _ = _run(sample, LifeLauncher("spawn"), work / "sample-spawn")
    print(
        f"isolation, same {len(sample)} cases: fork {sum(fork_s):.1f} s ({fork_lives} lives), spawn {sum(spawn_s):.1f} s ({spawn_lives} lives)"
    )
    print(f"  spawn / fork = {sum(spawn_s) / sum(fork_s):.1f}x")

    lives_per_case = lives / len(cases)
    started = time.perf_counter()
    for _ in range(30):
        fork.server.run(os.getpid, (), deadline=30)
    back_to_back = (time.perf_counter() - started) / 30
    fork_rt = statistics.median(measured.round_trips)
    fsync_s = statistics.median(measured.fsync_seconds)
    floor = lives_per_case * fork_rt + fsync_s
    print(
        f"floor: fork server round trip {fork_rt * 1000:.1f} ms"
        f" (median of {len(measured.round_trips)}, one after each case; {back_to_back * 1000:.1f} ms back to back)"
    )
    print(
        f"  a case needs {lives_per_case:.2f} lives and makes {statistics.mean(measured.fsyncs):.1f} fsyncs"
        f" (session, directories, the tools' files); the median case's took {fsync_s * 1000:.1f} ms"
    )
    print(
        f"  floor per case {floor * 1000:.0f} ms; median case is {median / floor:.1f}x the floor"
        " (target at most 3x)"
    )
    scenario = next(s for s, p in cases if p is not None and p.boundary == "after_running")
    warm = _warm_life(scenario, work / "warm")
    print(
        f"  one clean life in this process, no fork ({scenario.path.name}): median {warm * 1000:.0f} ms"
        " -- the agent's own work on top of the floor"
    )

    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"peak memory: this process {usage / 1024:.0f} MiB, largest child {children / 1024:.0f} MiB")

    if args.memory:
        first, second = _python_heap(cases, fork, work / "heap")
        print(
            f"Python heap (tracemalloc, the matrix again): +{first / 1024:.0f} KiB over the first half,"
            f" +{second / 1024:.0f} KiB over the second ({len(cases[1::2])} cases)"
        )

    if args.pytest:
        # As CI runs it and with --no-snapshots, in the same minutes (issue 31: under 35 s on a
        # quiet machine); with --power-column also without the power column (issue 19's
        # target: power@P items add at most 30%, they reuse P's first crash).
        walls: dict[str, float] = {}
        runs = [("as CI runs it", []), ("with --no-snapshots", ["--no-snapshots"])]
        if args.power_column:
            runs.append(("without the power column", ["--no-power-loss"]))
        rss_log = work / "rss.log"
        env = dict(os.environ, CRASHMATRIX_RSS_LOG=str(rss_log), PYTHONPATH=str(ROOT / "benchmarks"))
        for label, extra in runs:
            rss_log.write_text("")
            started = time.perf_counter()
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "scenarios",
                    "-n",
                    "2",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "--no-report",
                    "-p",
                    "rss_probe",
                    *extra,
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                env=env,
            )
            walls[label] = time.perf_counter() - started
            last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:]
            print(f"pytest scenarios/ -n 2 {label}: {walls[label]:.0f} s wall ({last})")
            for line in sorted(rss_log.read_text().splitlines()):
                role, pid, collected, end, peak = line.split()
                print(
                    f"  {role} {pid}: RSS {int(collected) / 1024:.0f} MiB after collection,"
                    f" {int(end) / 1024:.0f} MiB at the end; peak {int(peak) / 1024:.0f} MiB"
                )
        full, plain = walls["as CI runs it"], walls["with --no-snapshots"]
        print(f"  snapshots take {100 * (full - plain) / plain:+.0f}% wall time against --no-snapshots")
        if "without the power column" in walls:
            base = walls["without the power column"]
            print(
                f"  the power column adds {100 * (full - base) / base:+.0f}% wall time (target: at most +30%)"
            )
        # Without a bytecode cache every process compiles the project from source (and
        # pytest rewrites it): the first run on a fresh clone, or PYTHONDONTWRITEBYTECODE=1.
        cached = any((ROOT / "harness" / "__pycache__").glob("*.pyc"))
        no_write = os.environ.get("PYTHONDONTWRITEBYTECODE")
        print(
            f"  bytecode cache: {'present' if cached else 'absent'}"
            + (", PYTHONDONTWRITEBYTECODE is set" if no_write else "")
        )
    if args.ci_step:
        _ci_step()
    return 0


def _busy_ticks() -> int:
    """The machine's CPU ticks spent so far, every process's (user, nice, system, irq,
    softirq, steal: all but idle and iowait)."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(value) for value in stat.readline().split()[1:9]]
    return sum(fields) - fields[3] - fields[4]


def _ci_step() -> None:
    """The README's test command as ``.ci/run`` runs it: its wall time, and the CPU the
    machine used meanwhile (the step is CPU-bound: what is left to cut is CPU)."""
    env = dict(os.environ)
    shm = Path("/dev/shm")
    # .ci/run's choice: case directories on a tmpfs with room (10% less wall time than ext4).
    if "TMPDIR" not in env and shm.is_dir() and os.access(shm, os.W_OK):
        stat = os.statvfs(shm)
        if stat.f_bavail * stat.f_frsize > 4 * 1024**3:
            env["TMPDIR"] = str(shm)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "tests",
        "scenarios",
        "-n",
        "2",
        "-p",
        "no:cacheprovider",
        "-q",
    ]
    load = os.getloadavg()[0]
    ticks, started = _busy_ticks(), time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    cpu = (_busy_ticks() - ticks) / os.sysconf("SC_CLK_TCK")
    summary = [
        line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed).* in [\d.]+s", line)
    ]
    last = summary[-1].strip("= ") if summary else done.stdout[-300:] + done.stderr[-300:]
    print(
        f"CI's test step, pytest tests scenarios -n 2 (TMPDIR={env.get('TMPDIR', 'unset')}, load"
        f" {load:.1f} before): {wall:.0f} s wall (target under 240 s quiet), exit {done.returncode} ({last})"
    )
    print(
        f"  CPU of the whole machine meanwhile: {cpu:.0f} s, {100 * cpu / (wall * (os.cpu_count() or 1)):.0f}%"
        f" of {os.cpu_count()} cores; 240 s at that use holds {cpu * 240 / wall:.0f} s of CPU:"
        f" {cpu - cpu * 240 / wall:.0f} s to cut"
    )


if __name__ == "__main__":
    raise SystemExit(main())
