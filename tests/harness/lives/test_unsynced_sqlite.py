"""A life's SQLite connections skip their syncs, unless the life records syncs for a power loss
(``harness.lives.life.unsynced_sqlite``): a SIGKILL cannot tell the difference, the disk time
can."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from crashmatrix.harness.agents.protocol import LifeContext
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.casedir import prepare_case
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.lives.life import LifeSpec, unsynced_sqlite

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "send_email" / "send_once.yaml"
FULL, OFF = 2, 0  # PRAGMA synchronous's answers


def _synchronous(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        value: int = conn.execute("PRAGMA synchronous").fetchone()[0]
        return value
    finally:
        conn.close()


def test_connections_opened_after_it_do_not_sync_and_only_in_the_process_that_called_it(
    tmp_path: Path,
) -> None:
    database = tmp_path / "agent.sqlite"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: a life's process
        try:
            unsynced_sqlite()
            unsynced_sqlite()  # a second call wraps nothing twice
            first = _synchronous(database)
            wrapped = getattr(sqlite3.connect, "__wrapped__", None)
            once = wrapped is not None and not hasattr(wrapped, "__wrapped__")
            os.write(write, f"{first} {once}".encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as answer:
        assert answer.read() == f"{OFF} True"
    assert _synchronous(database) == FULL  # this process (a harness, a fork server) keeps syncing


class SyncProbe:
    """An agent whose life opens a SQLite database and notes how it syncs."""

    def run_life(self, ctx: LifeContext) -> None:
        value = _synchronous(ctx.case_dir / "agent.sqlite")
        (ctx.case_dir / "synchronous.txt").write_text(str(value), encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize(("power_loss", "expected"), [(False, OFF), (True, FULL)])
def test_a_forked_life_opens_sqlite_unsynced_unless_it_records_syncs_for_a_power_loss(
    tmp_path: Path, power_loss: bool, expected: int
) -> None:
    scenario = load_scenario(SCENARIO)
    prepare_case(tmp_path, scenario)
    launcher = LifeLauncher("fork")
    record, _ = launcher.run(
        LifeSpec(str(tmp_path), scenario, f"{__name__}:SyncProbe", 1, power_loss=power_loss), deadline=30
    )
    assert record.status == "exited", record.error
    assert (tmp_path / "synchronous.txt").read_text(encoding="utf-8") == str(expected)
