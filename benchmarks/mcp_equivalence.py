"""Issue 28's equivalence over the whole built-in suite: the reference agent with its tools in
process, and the same agent with every tool call over MCP (``examples/reference_mcp``), each
case's verdict compared; prints the figures and every difference (exit 1 if there is one).

    python benchmarks/mcp_equivalence.py                 # scenarios/, pytest -n 2
    python benchmarks/mcp_equivalence.py --per-folder    # one scenario of each folder
    python benchmarks/mcp_equivalence.py --workers 1 --scenarios scenarios/send_email

Each run is ``python -m pytest SCENARIOS --agent=A -n W`` in a directory of its own (a copy of
the scenarios), as a user runs it; the two ``matrix.json`` files are compared by
``tests/reference_agent/test_mcp_equivalence.compare`` (the known differences are its
``KNOWN`` columns: the tool-side faults, which act at another seam in each run: the mock
tools' backend in process, the MCP server over MCP).
The fast proof is that test, on one scenario of each folder. The load average is printed
before and after: a figure taken with other work on the cores says so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests package, for compare()

from crashmatrix.reports.results import Results, load_results  # noqa: E402
from tests.reference_agent.test_mcp_equivalence import ADAPTER, KNOWN, PER_FOLDER, compare  # noqa: E402


def _copy(scenarios: Sequence[Path], copy: Path) -> None:
    """The scenarios in one folder, each with the contracts folder it names beside it."""
    copy.mkdir()
    for path in scenarios:
        if path.is_dir():
            shutil.copytree(path, copy / path.name)
            continue
        shutil.copy(path, copy)
        contracts = path.parent / "contracts"
        if contracts.is_dir() and not (copy / "contracts").exists():
            shutil.copytree(contracts, copy / "contracts")


def _run(where: Path, scenarios: Sequence[Path], agent: str, workers: int) -> tuple[Results, float]:
    where.mkdir(parents=True)
    _copy(scenarios, where / "scenarios")
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "scenarios", f"--agent={agent}", "-n", str(workers),
            "-p", "no:cacheprovider", "--no-doctor", "-q", f"--basetemp={where / 'basetemp'}",
            "--no-double-resume",  # the reference agent's alone (test_mcp_equivalence.run)
        ],
        cwd=where,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    seconds = time.monotonic() - started
    matrix = where / "reports" / "latest" / "matrix.json"
    if not matrix.exists():
        sys.exit(
            f"{agent}: no matrix.json (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return load_results(matrix), seconds


def _tally(results: Results) -> str:
    counts = Counter(case.status for case in results.cases)
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scenarios", type=Path, nargs="+", default=[ROOT / "scenarios"])
    parser.add_argument("--per-folder", action="store_true", help="one scenario of each folder (PER_FOLDER)")
    args = parser.parse_args(argv)
    scenarios = [ROOT / "scenarios" / name for name in PER_FOLDER] if args.per_folder else args.scenarios
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="crashmatrix-mcp-equivalence-") as tmp:
        runs = {}
        for name, agent in (("in process", "reference"), ("over MCP", str(ADAPTER))):
            results, seconds = _run(
                Path(tmp) / name.replace(" ", "_"), [p.resolve() for p in scenarios], agent, args.workers
            )
            runs[name] = results
            print(f"{name:>10}: {len(results.cases)} cases in {seconds:.0f} s ({_tally(results)})")
        native, over_mcp = runs["in process"], runs["over MCP"]
        tool_side = sum(1 for case in over_mcp.cases if case.boundary in KNOWN)
        native_side = sum(1 for case in native.cases if case.boundary in KNOWN)
        print(f"tool-side cases ({', '.join(KNOWN)}): {native_side} in process, {tool_side} over MCP")
        differences = compare(native, over_mcp)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for line in differences:
        print(f"  DIFFERENT {line}")
    # A line naming a case outside the tool-side columns is one of the reference agent's cases.
    crash = [line for line in differences if "::" in line and not any(f"::{k}[" in line for k in KNOWN)]
    own = [case for case in native.cases if case.boundary not in KNOWN]
    print(f"{len(differences)} differences; {len(own) - len(crash)} of {len(own)} crash cases the same")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
