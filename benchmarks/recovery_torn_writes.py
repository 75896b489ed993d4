"""What ``recovery_torn_writes`` (the scenario key, or ``--recovery-torn-writes`` for every
scenario) adds to the built-in suite: prints figures, asserts nothing.

    python benchmarks/recovery_torn_writes.py                     # every scenario of scenarios/
    python benchmarks/recovery_torn_writes.py scenarios/send_email

For each ``recovery@P`` item a scenario has (each call's first passage of the
``RECOVERY_FIRST`` boundaries), P's first crash is run once (life 1 killed at P, life 2 to its
end) and its recovery window counted both ways (``recovery_window``): the second crashes
without torn writes, and with them. No pytest item is added by the opt-in: each torn write is
one more second crash inside its ``recovery@P`` item, two lives (the recovering life killed
mid-append, and the third). The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from crashmatrix.harness.front.cases import enumerate_points
from crashmatrix.harness.front.mutation import scenario_files
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.plan.enumeration import RECOVERY_FIRST, recovery_window


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="?", type=Path, default=Path("scenarios"))
    args = parser.parse_args(argv)
    launcher = LifeLauncher(
        "fork", preload=["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]
    )
    print(f"load average before: {os.getloadavg()}")
    started = time.monotonic()
    items = boundaries = torn = 0
    opted = 0
    with tempfile.TemporaryDirectory(prefix="crashmatrix-torn-bench-") as scratch:
        work = Path(scratch)
        for path in scenario_files(args.scenarios):
            scenario = load_scenario(path)
            if not scenario.recovery_crashes:
                continue
            name = f"{path.parent.name}/{path.name}"
            enum = enumerate_points(scenario, launcher, work / name / "clean")
            firsts = [p for p in enum.points if p.boundary in RECOVERY_FIRST and p.occurrence == 1]
            plain = tears = 0
            for point in firsts:
                trace = run_case(work / name / point.id, scenario, launcher, point=point).trace
                plain += len(recovery_window(trace))
                tears += len(recovery_window(trace, torn=True))
            items += len(firsts)
            boundaries += plain
            torn += tears - plain
            opted += len(firsts) if scenario.recovery_torn_writes else 0
            mark = " (opts in)" if scenario.recovery_torn_writes else ""
            print(
                f"{name}{mark}: {len(firsts)} recovery@ items, {plain} second crashes, +{tears - plain} torn"
            )
    print(
        f"{items} recovery@ items: {boundaries} second crashes at boundaries; torn writes would add "
        f"{torn} ({2 * torn} lives, no item); {opted} items are in scenarios that opt in"
    )
    print(f"{time.monotonic() - started:.1f} s; load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
