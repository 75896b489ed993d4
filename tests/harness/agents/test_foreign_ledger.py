"""Whether a foreign agent is judged with a ledger (``harness.agents.foreign``): as its adapter
declares (``session.keeps_ledger``, or a ledger mapping), else as each case's session shows.

Declared, the ledger is required in every case: a case whose ledger lines went missing is
judged with them missing (red), never excused. Not declared, a case whose session holds no
ledger record is judged without one, and every ledger check says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crashmatrix.harness.agents.adapter_file import load_foreign
from crashmatrix.harness.agents.foreign import ForeignAdapter
from crashmatrix.harness.core.trace import CaseRun
from crashmatrix.harness.observation.observation import Observation

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "no_ledger"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
MESSAGES = [
    {"role": "user", "content": "mail alice"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_mail", "type": "function", "function": {"name": "send_email", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_mail", "content": '{"ok": true}'},
    {"role": "assistant", "content": "Sent."},
]
RUNNING = {"type": "tool_execution", "execution_id": "e1", "tool_call_id": "call_mail", "status": "running"}


def _adapter(tmp_path: Path, session: str = "") -> ForeignAdapter:
    (tmp_path / "agent.py").write_text("def main():\n    pass\n", encoding="utf-8")
    (tmp_path / "adapter.yaml").write_text(
        f"name: mailer\npython: {{script: agent.py}}\nsession:\n  path: chat.jsonl\n{session}",
        encoding="utf-8",
    )
    return ForeignAdapter(load_foreign(tmp_path / "adapter.yaml"))


def _observe(adapter: ForeignAdapter, tmp_path: Path, lines: list[dict[str, object]]) -> Observation:
    case = tmp_path / "case"
    workspace = case / "world" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "chat.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8"
    )
    return adapter.observe(CaseRun(case, ()))


@pytest.mark.parametrize(
    ("session", "declared"),
    [
        ("", None),
        ("  keeps_ledger: true\n", True),
        ("  keeps_ledger: false\n", False),
        ("  statuses: {in_progress: running}\n", True),
        ("  ledger_type: step\n", True),
    ],
)
def test_an_adapter_declares_a_ledger_by_keeps_ledger_or_by_mapping_one(
    tmp_path: Path, session: str, declared: bool | None
) -> None:
    assert _adapter(tmp_path, session).spec.keeps_ledger is declared


def test_a_boundary_rule_fired_by_a_records_status_declares_a_ledger(tmp_path: Path) -> None:
    # The examples that keep a ledger say where its running record is written: they are held
    # to it in every case. A rule on a message's role says nothing about a ledger.
    running = "    where: [{argument: record, key: status, equals: running}]\n"
    role = "    where: [{argument: record, key: message.role, equals: tool}]\n"
    for where, declared in ((running, True), (role, None)):
        (tmp_path / "agent.py").write_text("def save(record):\n    pass\n", encoding="utf-8")
        (tmp_path / "adapter.yaml").write_text(
            "name: mailer\npython: {script: agent.py}\nboundaries:\n  - function: save\n"
            "    boundary: after_running\n" + where + "    call_id: {argument: record, key: id}\n",
            encoding="utf-8",
        )
        assert load_foreign(tmp_path / "adapter.yaml").keeps_ledger is declared, where
    assert load_foreign(EXAMPLES / "desk_agent" / "adapter.yaml").keeps_ledger is True


def test_the_golden_agent_without_a_ledger_declares_nothing() -> None:
    assert load_foreign(GOLDEN / "adapter.yaml").keeps_ledger is None


def test_undeclared_a_case_without_a_ledger_record_is_judged_without_a_ledger_and_says_why(
    tmp_path: Path,
) -> None:
    observation = _observe(_adapter(tmp_path), tmp_path, MESSAGES)
    assert observation.keeps_ledger is False
    assert observation.no_ledger == (
        "its session holds no 'tool_execution' record and adapter mailer does not declare "
        "session.keeps_ledger"
    )


def test_undeclared_a_case_whose_session_holds_a_ledger_record_is_judged_with_it(tmp_path: Path) -> None:
    observation = _observe(_adapter(tmp_path), tmp_path, [*MESSAGES[:2], RUNNING, *MESSAGES[2:]])
    assert observation.keeps_ledger is True and observation.no_ledger == ""


def test_declared_a_case_that_lost_its_ledger_lines_is_still_judged_with_a_ledger(tmp_path: Path) -> None:
    observation = _observe(_adapter(tmp_path, "  keeps_ledger: true\n"), tmp_path, MESSAGES)
    assert observation.keeps_ledger is True


def test_declared_without_a_ledger_the_reason_names_the_declaration(tmp_path: Path) -> None:
    observation = _observe(_adapter(tmp_path, "  keeps_ledger: false\n"), tmp_path, MESSAGES)
    assert observation.keeps_ledger is False
    assert observation.no_ledger == "adapter mailer says session.keeps_ledger: false"
