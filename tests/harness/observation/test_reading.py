"""harness.observation.reading: an agent's session the harness cannot read after the last
life is a verdict on the agent (where, which line, what is wrong), never an exception and
never a message telling a person to repair a file in a case directory the harness made."""

from __future__ import annotations

import json
from pathlib import Path

from crashmatrix.harness.agents.foreign import load_foreign_adapter
from crashmatrix.harness.core.trace import CaseRun, LifeRecord
from crashmatrix.harness.lives.casedir import session_path_of
from crashmatrix.harness.observation.reading import read_observation

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
LIVES = (
    LifeRecord(1, "torn_write[call_1:running]", "crashed", -9, 0.1),
    LifeRecord(2, None, "exited", 0, 0.1),
)

USER = json.dumps({"type": "message", "message": {"role": "user", "content": "Send it"}})
# A torn half of a ledger line, and the next line the agent appended right after it.
TORN = '{"type": "tool_execution", "tool_call_id": "call_1", "sta'
NEXT = json.dumps({"type": "message", "message": {"role": "assistant", "content": "done"}})


def _glued(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = f"{USER}\n{TORN}{NEXT}\n".encode()
    path.write_bytes(data)
    return data


def test_a_native_session_left_unreadable_is_no_session_and_where_it_broke(tmp_path: Path) -> None:
    _glued(session_path_of(tmp_path))
    seen = read_observation(CaseRun(tmp_path, LIVES, ()))
    assert seen.session is None
    assert seen.session_problem.startswith(
        f".agent_state/session-case.jsonl:2 (byte {len(USER) + 1}): line is not JSON"
    ), seen.session_problem
    assert "repair" not in seen.session_problem and "\n" not in seen.session_problem


def test_a_foreign_session_left_unreadable_names_the_agents_own_file_and_line(tmp_path: Path) -> None:
    adapter = load_foreign_adapter(EXAMPLES / "desk_agent" / "adapter.yaml")
    _glued(adapter.raw_session(tmp_path))
    seen = adapter.observe(CaseRun(tmp_path, LIVES, ()))
    assert seen.session is None
    assert seen.session_problem.startswith(".desk/session.jsonl:2 (byte "), seen.session_problem
    assert "repair" not in seen.session_problem


def test_probing_an_unreadable_foreign_session_is_a_size_not_known(tmp_path: Path) -> None:
    # A probe runs inside the agent's life and after it: an unreadable session there used to
    # raise out of the lives stage (a traceback under pytest, ``crashmatrix run`` aborted).
    adapter = load_foreign_adapter(EXAMPLES / "desk_agent" / "adapter.yaml")
    data = _glued(adapter.raw_session(tmp_path))
    assert adapter._session_size(tmp_path) == -1
    adapter.raw_session(tmp_path).write_bytes(data[: len(USER) + 1])  # readable again
    assert adapter._session_size(tmp_path) > 0
