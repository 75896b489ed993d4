"""Whether an agent's matrix is the same from one run to the next: prints every case whose
verdict differs between runs (exit 1 if one does), asserts nothing else.

    python benchmarks/repeatability.py                                  # scenarios/, 3 runs
    python benchmarks/repeatability.py --agent examples/langgraph_team/adapter_fixed.yaml \\
        --scenarios scenarios/send_email scenarios/create_order --runs 3

Each run is ``python -m pytest SCENARIOS -n W --no-doctor`` (with ``--agent``), as CI runs
it; the runs' ``matrix.json`` files are compared case by case with the first one's, by
``tests/harness/lives/test_snapshots.compare``: status, lives, failed invariants and
expectation keys, the second crashes of ``recovery@P``. What the case observed is left out by
default (``--leave-out`` names the parts left out; ``--leave-out observed.world.files`` keeps
all but the files' contents): an agent that writes wall-clock times or random names into
its files differs there in any two runs. A cell that differs judged a different state or a different
set of crashes from one run to the next: its red or green is not reproducible. It found the
LangGraph adapter's fourth held order (docs/frameworks.md): a recovering graph's window was
one point in one run and the rest of the run in the next. The built-in suite on the
reference agent: 1518 of 1518 cases the same in three runs (2026-12-03). Expect a
``double@P`` case of an agent that holds no lease to differ: its two lives race on one
session, and it is red in every run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests package, for compare()

from benchmarks.snapshot_equivalence import _pytest  # noqa: E402
from crashmatrix.reports.results import Results, load_results  # noqa: E402
from tests.harness.lives.test_snapshots import compare  # noqa: E402


def _run(where: Path, scenarios: Sequence[str], workers: int, extra: Sequence[str]) -> Results:
    matrix, _ = _pytest(where, scenarios, workers, *extra, label=where.name)
    return load_results(matrix)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", nargs="*", default=["scenarios"])
    parser.add_argument("--agent", help="an adapter or module:factory (default: the reference agent)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--no-snapshots", action="store_true",
        help="first crashes from lives killed at each point, not snapshots: whether a case that "
        "differs with snapshots differs without them too",
    )  # fmt: skip
    parser.add_argument(
        "--leave-out", nargs="*", default=["observed"], metavar="PATH",
        help="parts of a case not compared (default: observed); none with a bare --leave-out",
    )  # fmt: skip
    args = parser.parse_args(argv)
    extra = [
        *(["--agent", args.agent] if args.agent else []),
        *(["--no-snapshots"] if args.no_snapshots else []),
    ]
    work = Path(tempfile.mkdtemp(prefix="crashmatrix-repeatability-"))
    runs = [_run(work / f"run-{n}", args.scenarios, args.workers, extra) for n in range(1, args.runs + 1)]
    found = 0
    for n, other in enumerate(runs[1:], start=2):
        lines = compare(
            runs[0],
            other,
            runs=("first", "other"),
            said=("in run 1", f"in run {n}"),
            leave_out=tuple(args.leave_out),
        )
        print(f"run 1 / run {n}: {len(runs[0].cases)} cases, {len(lines)} different")
        for line in lines:
            print("  DIFFERENT:", line)
        found += len(lines)
    print(f"runs kept in {work}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
