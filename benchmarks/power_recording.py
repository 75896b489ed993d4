"""What the per-file power-loss model costs (``harness/lives/power.py``).

Three figures, printed:

* in-process: the start record of a life (listing + copy of the workspace) and the cost a
  recorded fsync adds (a copy of the synced file, a log line), on a workspace like a case's
  with a session of realistic size;
* end to end: ``power@P`` cases against the same ``P`` as plain crashes (forked lives), on
  the reference agent, for every power point of a few scenarios.

Run: ``.venv/bin/python benchmarks/power_recording.py``. Never a timed test.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from crashmatrix.harness.front.cases import enumerate_points, run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.casedir import session_path_of
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.lives.power import cut_power, record_for
from crashmatrix.harness.plan.enumeration import power_points

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = [
    "send_email/send_once.yaml",
    "write_file/overwrite_existing.yaml",
    "multi_call/read_then_write.yaml",
]


def in_process(rounds: int = 200) -> None:
    starts, syncs, plain, cuts = [], [], [], []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            case = Path(tmp)
            ws = case / "world" / "workspace"
            ws.mkdir(parents=True)
            for index in range(5):
                (ws / f"file{index}.txt").write_bytes(b"x" * 400)
            session = session_path_of(case)
            session.parent.mkdir()
            session.write_bytes(b'{"line": "of a session"}\n' * 400)  # ~10 KB
            started = time.perf_counter()
            restore = record_for("reference", case)
            starts.append(time.perf_counter() - started)
            assert restore is not None
            fd = os.open(session, os.O_WRONLY | os.O_APPEND)
            for _line in range(10):
                os.write(fd, b'{"another": "line"}\n')
                started = time.perf_counter()
                os.fsync(fd)
                syncs.append(time.perf_counter() - started)
            restore()
            for _line in range(10):
                os.write(fd, b'{"another": "line"}\n')
                started = time.perf_counter()
                os.fsync(fd)
                plain.append(time.perf_counter() - started)
            os.close(fd)
            started = time.perf_counter()
            cut_power(case, "reference", 1)
            cuts.append(time.perf_counter() - started)
    ms = 1000
    print(f"start record (5 files + 10 KB session): median {statistics.median(starts) * ms:.3f} ms")
    print(
        f"fsync of the session: recorded median {statistics.median(syncs) * ms:.3f} ms, "
        f"plain median {statistics.median(plain) * ms:.3f} ms"
    )
    print(f"cut_power (durable state, outcomes, rebuild): median {statistics.median(cuts) * ms:.3f} ms")


def end_to_end() -> None:
    launcher = LifeLauncher(
        "fork", preload=["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]
    )
    total = {"crash": 0.0, "power": 0.0}
    cases = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in SCENARIOS:
            scenario = load_scenario(ROOT / "scenarios" / name)
            enum = enumerate_points(scenario, launcher, Path(tmp) / name / "enum")
            for point in power_points(enum.points):
                for kind in total:
                    started = time.perf_counter()
                    result = run_point(
                        scenario,
                        point,
                        launcher,
                        Path(tmp) / name / kind / point.id,
                        power_loss=kind == "power",
                    )
                    total[kind] += time.perf_counter() - started
                    assert result.passed, (name, kind, point.id, result.verdict)
                cases += 1
    print(
        f"{cases} points: plain crash {total['crash'] / cases * 1000:.1f} ms/case, "
        f"power@ {total['power'] / cases * 1000:.1f} ms/case "
        f"(+{(total['power'] / total['crash'] - 1) * 100:.0f}%)"
    )


if __name__ == "__main__":
    in_process()
    end_to_end()
