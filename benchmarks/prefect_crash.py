"""What Prefect 3 does when the process running a flow is SIGKILLed after a task's side effect:
measured with real processes, printed (docs/frameworks.md, "Temporal and Prefect").

Prefect is not one of crashmatrix's extras: run this with an interpreter that has it, e.g.

    python3 -m venv /tmp/prefect-venv && /tmp/prefect-venv/bin/pip install 'prefect==3.9.1'
    /tmp/prefect-venv/bin/python benchmarks/prefect_crash.py

Each case runs a flow twice, as a team's process and its restart would: the flow's one task
sends an email into a SQLite world (a row per send, committed before anything else, with the
flow run's and task run's ids and the life). Life 1 SIGKILLs its own process at the case's
moment; life 2 runs the same program again. No ``PREFECT_API_URL``: each process starts
Prefect's ephemeral API server on a SQLite database under its ``PREFECT_HOME`` (one per case,
shared by its two lives, as on one machine), which is also where this script reads the flow
runs' states; results are persisted under it too.

Cases (the task's cache policy x where life 1 is killed):

* ``default/in-task``: Prefect 3's default cache policy (inputs, task source and the flow run's
  id), killed inside the task after its effect, before its result is persisted;
* ``inputs/in-task``: ``cache_policy=INPUTS`` with ``persist_result=True`` (a cache across flow
  runs), killed at the same moment;
* ``inputs/after-task``: the same task, killed in the flow after the task returned and its
  result was persisted.

Printed per case: the emails sent, each life's flow run (a new run, or life 1's resumed), the
flow runs' states on the server after life 2, whether life 2's task body ran or its result
came from the cache, and each life's wall time (the ephemeral server's start is most of it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

FLOW = textwrap.dedent(
    """
    import os, signal, sqlite3, sys

    from prefect import flow, task
    from prefect.cache_policies import DEFAULT, INPUTS
    from prefect.runtime import flow_run, task_run

    POLICY, KILL, LIFE, WORLD = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


    def world():
        db = sqlite3.connect(WORLD, isolation_level=None)
        db.execute("CREATE TABLE IF NOT EXISTS sent (life INT, flow_run TEXT, task_run TEXT, recipient TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS ran (life INT, flow_run TEXT, what TEXT)")
        return db


    @task(persist_result=True, cache_policy=INPUTS if POLICY == "inputs" else DEFAULT)
    def send_email(to):
        db = world()
        db.execute("INSERT INTO sent VALUES (?, ?, ?, ?)", (LIFE, str(flow_run.id), str(task_run.id), to))
        db.close()
        if LIFE == 1 and KILL == "in-task":
            os.kill(os.getpid(), signal.SIGKILL)  # the effect made, the task's result not persisted
        return f"Email sent to {to}."


    @flow(name="support-" + POLICY + "-" + KILL, persist_result=True)
    def support(to):
        world().execute("INSERT INTO ran VALUES (?, ?, 'flow')", (LIFE, str(flow_run.id)))
        told = send_email(to)
        if LIFE == 1 and KILL == "after-task":
            os.kill(os.getpid(), signal.SIGKILL)  # the task returned, its result persisted
        return told


    print(support("alice@example.com"))
    """
)

CASES = (("default", "in-task"), ("inputs", "in-task"), ("inputs", "after-task"))


def _life(
    folder: Path, env: dict[str, str], policy: str, kill: str, life: int, timeout: float
) -> tuple[int, float]:
    """One life, in a session of its own: the ephemeral API server Prefect starts is a child
    process that outlives a SIGKILLed flow process (holding its output open); it is stopped
    with the life's process group, as the machine or container a crash takes down would."""
    started = time.monotonic()
    with open(folder / f"life-{policy}-{kill}-{life}.log", "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                str(folder / "flow.py"),
                policy,
                kill,
                str(life),
                str(folder / f"world-{policy}-{kill}.db"),
            ],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        took = time.monotonic() - started
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the server left behind, and a hung life
        process.wait()
    return (process.returncode if code is None else code), took


def _rows(path: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return list(db.execute(sql, params).fetchall())


def run_case(folder: Path, env: dict[str, str], policy: str, kill: str, timeout: float) -> dict[str, object]:
    codes, times = [], []
    # A home of its own per case (the two lives share it): a result cached by an earlier case
    # would be a cache hit here (INPUTS keys on the task's inputs alone, across flows).
    env = {**env, "PREFECT_HOME": str(Path(env["PREFECT_HOME"]) / policy / kill)}
    Path(env["PREFECT_HOME"]).mkdir(parents=True)  # Prefect makes only the last level
    for life in (1, 2):
        code, took = _life(folder, env, policy, kill, life, timeout)
        codes.append(code)
        times.append(round(took, 1))
    world = folder / f"world-{policy}-{kill}.db"
    sent = _rows(world, "SELECT life, flow_run, task_run FROM sent ORDER BY rowid")
    flows = _rows(world, "SELECT life, flow_run FROM ran ORDER BY rowid")
    runs = {life: run for life, run in flows}
    server = Path(env["PREFECT_HOME"]) / "prefect.db"
    states = _rows(
        server,
        "SELECT r.id, r.state_type FROM flow_run r JOIN flow f ON f.id = r.flow_id WHERE f.name = ?"
        " ORDER BY r.created",
        f"support-{policy}-{kill}",
    )
    task_states = _rows(
        server,
        "SELECT t.flow_run_id, t.state_type, t.state_name FROM task_run t JOIN flow_run r ON r.id = t.flow_run_id"
        " JOIN flow f ON f.id = r.flow_id WHERE f.name = ? ORDER BY t.created",
        f"support-{policy}-{kill}",
    )
    return {
        "case": f"{policy}/{kill}",
        "exit codes": codes,  # -9: SIGKILLed
        "seconds per life": times,
        "emails": len(sent),
        "emails by life": [life for life, _, _ in sent],
        "life 2's flow run": "life 1's, resumed"
        if runs.get(2) and runs.get(2) == runs.get(1)
        else "a new run",
        "life 2's task body ran": any(life == 2 for life, _, _ in sent),
        "flow runs on the server": [state for _, state in states],
        "task runs on the server": [f"{state} ({name})" for _, state, name in task_states],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a life may take")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    args = parser.parse_args()
    try:
        import prefect
    except ImportError:
        sys.exit(
            "prefect is not installed in this interpreter: pip install 'prefect==3.9.1' (in a venv of its own)"
        )
    folder = Path(tempfile.mkdtemp(prefix="prefect-crash-"))
    (folder / "flow.py").write_text(FLOW, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(folder / "home"),
        # Under load the ephemeral server's start can exceed its default wait.
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180",
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    print(f"prefect {prefect.__version__}, python {sys.version.split()[0]}, load {os.getloadavg()[0]:.1f}")
    for policy, kill in CASES:
        print(json.dumps(run_case(folder, env, policy, kill, args.timeout)))
    print(f"working folder: {folder}" if args.keep else "")
    if not args.keep:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
