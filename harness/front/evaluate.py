"""``crashmatrix eval``: the built-in suite against one agent, and its scorecard.

    crashmatrix eval --agent ADAPTER [-n N] [--out DIR] [--list] [-- PYTEST ARGS...]

It runs ``pytest`` on the suite shipped with crashmatrix (``harness.input.suite``), in a
child interpreter so the run is exactly what ``pytest scenarios/ --agent ADAPTER`` gives
(same plugin, same report), then prints the scorecard of named evals from the run's
``matrix.json``. The exit status is pytest's: 0 when every case passed (not applicable
and not reached are not failures), 1 when one failed, 2 on bad input.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from crashmatrix.harness.errors import CrashmatrixError, InputError

__all__ = ["main_eval", "pytest_command"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crashmatrix eval",
        description="Run the built-in scenario suite against an agent and print its scorecard.",
    )
    parser.add_argument(
        "--agent", required=True, help="an adapter file (agent.yaml), module:factory or reference"
    )
    parser.add_argument(
        "-n", "--workers", default="auto", help="pytest-xdist workers (default: auto; 0: none)"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("reports") / "eval", help="report directory (default: reports/eval)"
    )
    parser.add_argument(
        "--scenarios", type=Path, default=None, help="another suite (default: the built-in one)"
    )
    parser.add_argument(
        "--list", action="store_true", help="list the suite's scenarios and named evals; run nothing"
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments (-k, -x, ...)")
    return parser


def pytest_command(suite: Path, agent: str, workers: str, out: Path, extra: Sequence[str] = ()) -> list[str]:
    """The child pytest run; ``-p no:cacheprovider`` so an installed suite's folder is not written."""
    command = [sys.executable, "-m", "pytest", str(suite), "--agent", agent, "--report-dir", str(out)]
    # Wherever the suite lives, its files are scenarios (with or without the schema line).
    command += ["-o", f"crashmatrix_paths={suite.resolve()}"]
    command += ["-p", "no:cacheprovider", "-q"]
    if workers != "0":
        command += ["-n", workers]
    return [*command, *extra]


def _list(suite: Path) -> int:
    from crashmatrix.harness.core.evals import SEED004_EVALS
    from crashmatrix.harness.input.scenario import load_scenario
    from crashmatrix.harness.input.suite import scenario_files

    paths = scenario_files(suite)
    shown: dict[str, list[str]] = {eval_id: [] for eval_id in SEED004_EVALS}
    for path in paths:
        scenario = load_scenario(path)
        for eval_id in scenario.evals:
            shown[eval_id].append(str(path.relative_to(suite) if path.is_relative_to(suite) else path))
    print(f"{len(paths)} scenarios in {suite}")
    for eval_id, spec in SEED004_EVALS.items():
        print(f"  {eval_id}: {spec.title}")
        print("    shown by: " + (", ".join(shown[eval_id]) or "no scenario of this suite"))
    return 0


def main_eval(argv: Sequence[str]) -> int:
    from crashmatrix.harness.agents.loading import load_adapter
    from crashmatrix.harness.input.suite import BUILTIN_SUITE

    args = _parser().parse_args(list(argv))
    suite: Path = args.scenarios or BUILTIN_SUITE
    try:
        if not suite.exists():
            raise InputError(f"--scenarios {suite}: no such file or directory")
        if args.list:
            return _list(suite)
        load_adapter(args.agent)  # a bad adapter file fails here, in one line, before pytest starts
    except CrashmatrixError as error:
        print(f"crashmatrix: {error}", file=sys.stderr)
        return 2
    command = pytest_command(suite, args.agent, args.workers, args.out, args.pytest_args)
    # A results file left by an earlier run must never be scored as this run's.
    (args.out / "matrix.json").unlink(missing_ok=True)
    print("$ " + " ".join(command), flush=True)
    # The agent's adapter file and the report directory are the user's paths, relative to
    # where they stand: the child runs there too.
    code = subprocess.run(command, cwd=os.getcwd(), check=False).returncode
    return _print_scorecard(args.out / "matrix.json", code)


def _print_scorecard(results_path: Path, code: int) -> int:
    from crashmatrix.reports.results import load_results
    from crashmatrix.reports.scorecard import build_scorecard
    from crashmatrix.reports.terminal import render_scorecard

    if not results_path.exists():
        print(
            f"crashmatrix: the run wrote no {results_path} (pytest exit {code}); no scorecard",
            file=sys.stderr,
        )
        return code or 2
    try:
        results = load_results(results_path)
    except CrashmatrixError as error:
        print(f"crashmatrix: {error}", file=sys.stderr)
        return 2
    print()
    print("\n".join(render_scorecard(build_scorecard(results), encoding=sys.stdout.encoding)))
    print(f"\nreport: {results_path.parent / 'matrix.html'}")
    return code
