"""Issue 31's equivalence over the whole built-in suite and every mutant: first crashes from one
clean life's snapshots (the default) against lives killed at each point (``--no-snapshots``),
each case's verdict compared; prints the figures and every difference (exit 1 if there is one).

    python benchmarks/snapshot_equivalence.py                # scenarios/ both ways, then mutants
    python benchmarks/snapshot_equivalence.py --no-mutants   # the suite only
    python benchmarks/snapshot_equivalence.py --workers 1 --scenarios scenarios/send_email
    python benchmarks/snapshot_equivalence.py --agent examples/desk_agent/adapter.yaml \
        --scenarios examples/desk_agent/scenario.yaml               # a kind-2 agent (no mutants)

The suite: ``python -m pytest SCENARIOS -n W`` as CI runs it, twice (``-o
crashmatrix_snapshots=true`` the first time, ``--no-snapshots`` the second), the two ``matrix.json`` files compared by ``tests/harness/lives/
test_snapshots.compare`` (status, lives, failed invariants and expectation keys, what was
observed, the second crashes). The mutants: ``crashmatrix mutants`` over the suite with and
without ``--no-snapshots``, its kill matrix (every cell of every mutant, and the case that
killed it) compared. The fast proof is that test, on a slice of the suite. The load average
is printed before and after: a figure taken with other work on the cores says so.

With ``--agent`` (a kind-2 agent's adapter: snapshots are taken where its life is one thread
at the point; a kind-3 one's: where the agent is stopped at its edge, alone), both runs are
of that agent, and the points left to killed lives are counted by their reason
(``snapshots.jsonl``). An agent that writes wall-clock times or random names
into its files differs in ``observed`` between any two runs, with or without snapshots
(``benchmarks/repeatability.py`` shows which): ``--leave-out observed.world.files`` compares
everything but those files' contents.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests package, for compare()

from crashmatrix.reports.results import load_results  # noqa: E402
from tests.harness.lives.test_snapshots import compare  # noqa: E402


def _pytest(
    where: Path, scenarios: Sequence[str], workers: int, *extra: str, label: str = ""
) -> tuple[Path, float]:
    report = where / "report"
    where.mkdir(parents=True)
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", *scenarios, "-n", str(workers), "-q", "-p", "no:cacheprovider",
            "--no-doctor", f"--report-dir={report}", f"--basetemp={where / 'basetemp'}", *extra,
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    seconds = time.monotonic() - started
    if not (report / "matrix.json").exists():
        sys.exit(f"no matrix.json (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    print(
        f"  {label or 'pytest ' + (' '.join(extra) or '(snapshots)')}: {seconds:.0f} s ({last})", flush=True
    )
    return report / "matrix.json", seconds


def _mutants(where: Path, workers: int, *extra: str) -> tuple[dict[str, object], float]:
    out = where / "kill-matrix.json"
    where.mkdir(parents=True)
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable, "-m", "crashmatrix.harness.front.cli", "mutants", "--workers", str(workers),
            "--json", str(out), *extra,
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    seconds = time.monotonic() - started
    if not out.exists():
        sys.exit(f"no kill matrix (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    print(f"  crashmatrix mutants {' '.join(extra) or '(snapshots)'}: {seconds:.0f} s", flush=True)
    return json.loads(out.read_text(encoding="utf-8")), seconds


def _kill_cells(matrix: dict[str, object]) -> dict[str, object]:
    """The kill matrix without its timings: each mutant's cells and kills."""
    rows = matrix.get("mutants") or []
    kept: dict[str, object] = {}
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict):
            kept[str(row.get("mutant"))] = {k: v for k, v in row.items() if k not in ("seconds", "cases_run")}
    return kept


def _manifests(basetemp: Path) -> tuple[int, Counter[str]]:
    """Points copied, and points left to killed lives by why, over every clean life's manifest."""
    copied, left = 0, Counter[str]()
    for manifest in basetemp.rglob("snapshots.jsonl"):
        for line in manifest.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if "skipped" in entry:
                left[str(entry["skipped"])] += 1
            else:
                copied += 1
    return copied, left


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", nargs="*", default=["scenarios"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-mutants", action="store_true")
    parser.add_argument("--agent", help="an adapter or module:factory; implies --no-mutants")
    parser.add_argument(
        "--leave-out", nargs="*", default=[], metavar="PATH",
        help="parts of a case not compared, e.g. observed.world.files (an agent writing wall-clock times)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    agent = ("--agent", args.agent) if args.agent else ()
    print(f"load average before: {os.getloadavg()[0]:.1f}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="crashmatrix-snapshot-equivalence-"))
    differences: list[str] = []
    # On by default under pytest; said anyway, so that an ini turning them off cannot.
    on, on_s = _pytest(work / "on", args.scenarios, args.workers, *agent, "-o", "crashmatrix_snapshots=true")
    off, off_s = _pytest(work / "off", args.scenarios, args.workers, *agent, "--no-snapshots")
    plain, snapshotted = load_results(off), load_results(on)
    found = compare(plain, snapshotted, leave_out=tuple(args.leave_out))
    print(f"suite: {len(snapshotted.cases)} cases, {len(snapshotted.cases) - len(found)} the same both ways")
    print(f"  {off_s:.0f} s without snapshots, {on_s:.0f} s with ({100 * (on_s - off_s) / off_s:+.0f}%)")
    differences += found
    copied, left = _manifests(work / "on" / "basetemp")
    print(
        f"  crashes (first, and second from recovering lives): {copied} from snapshots,"
        f" {sum(left.values())} from lives killed at the point"
    )
    for why, count in left.most_common():
        print(f"    {count} x {why}")
    if not args.no_mutants and not args.agent:
        killed_on, m_on = _mutants(work / "mutants-on", args.workers)
        killed_off, m_off = _mutants(work / "mutants-off", args.workers, "--no-snapshots")
        a, b = _kill_cells(killed_off), _kill_cells(killed_on)
        same = [m for m in a if a.get(m) == b.get(m)]
        print(
            f"mutants: {len(same)} of {len(a | b)} rows the same ({m_off:.0f} s without snapshots, {m_on:.0f} s with)"
        )
        differences += [
            f"mutant {m}: {a.get(m)!r} without snapshots, {b.get(m)!r} with"
            for m in sorted(a | b)
            if a.get(m) != b.get(m)
        ]
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    for line in differences:
        print("DIFFERENT:", line)
    return 1 if differences else 0


if __name__ == "__main__":
    raise SystemExit(main())
