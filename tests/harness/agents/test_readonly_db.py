"""An agent's database is read where it is, whatever its path holds."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from crashmatrix.harness.agents.readonly_db import connect_readonly


@pytest.mark.parametrize("folder", ["after_approved[call_0#2]", "what?mode=rw", "100% done", "plain"])
def test_a_database_under_a_crash_point_folder_is_read_not_missed(tmp_path: Path, folder: str) -> None:
    # Case directories are named after crash points: "#" once cut the path short and the
    # agent's session read as empty.
    path = tmp_path / folder / "state.db"
    path.parent.mkdir()
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE log (record TEXT)")
        conn.execute("INSERT INTO log VALUES ('one')")
    conn.close()
    reader = connect_readonly(path)
    try:
        assert reader.execute("SELECT record FROM log").fetchall() == [("one",)]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            reader.execute("INSERT INTO log VALUES ('two')")
    finally:
        reader.close()
