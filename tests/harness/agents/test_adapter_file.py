"""harness.agents.adapter_file: the catalogue's ``only:`` and ``shell:`` as the harness reads
them (their bad forms are one line each, pinned in tests/harness/data/broken/a40 to a45)."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.agents.adapter_file import load_foreign
from crashmatrix.harness.core.toolmap import ToolName


def _load(tmp_path: Path, catalogue: str, *, tools: str = "agent") -> dict[str, ToolName]:
    (tmp_path / "agent.py").write_text("def main():\n    pass\n", encoding="utf-8")
    path = tmp_path / "adapter.yaml"
    path.write_text(
        f"name: a\npython: {{script: agent.py}}\ntools: {tools}\ncatalogue:\n{catalogue}", encoding="utf-8"
    )
    tools_map = load_foreign(path).dialect.tools.tools
    assert tools_map is not None
    return dict(tools_map)


def test_a_list_holds_the_one_argument_under_the_agents_name(tmp_path: Path) -> None:
    entry = "  run_command: {name: run_bash, arguments: {command: cmd}, shell: real, only: ['^echo ']}\n"
    [(suite, tool)] = _load(tmp_path, entry).items()
    assert suite == "run_command"
    assert tool == ToolName("run_bash", {"command": "cmd"}, {"cmd": ("^echo ",)}, "real")


def test_a_mapping_names_the_suites_arguments_and_holds_the_agents(tmp_path: Path) -> None:
    entry = (
        "  send_email:\n    name: mail\n    arguments: {to: recipient}\n"
        "    only: {to: ['@example\\.com$'], body: [a, b]}\n"
    )
    tool = _load(tmp_path, entry)["send_email"]
    assert tool.only == {"recipient": (r"@example\.com$",), "body": ("a", "b")}
    assert tool.shell == "simulated"  # the default: the simulator, or not a shell at all


def test_a_tool_the_harness_runs_may_restrict_its_calls_but_is_never_a_real_shell(tmp_path: Path) -> None:
    entry = "  run_command: {only: ['^ls'], shell: simulated}\n"
    tool = _load(tmp_path, entry, tools="harness")["run_command"]
    assert (tool.name, tool.only, tool.shell) == ("run_command", {"command": ("^ls",)}, "simulated")


def test_a_rule_may_name_the_agents_own_function_by_its_module_name(tmp_path: Path) -> None:
    from types import ModuleType

    import pytest

    from crashmatrix.harness.agents.python_agent import SCRIPT_PREFIX, _resolve
    from crashmatrix.harness.errors import InputError

    (tmp_path / "toy_agent.py").write_text("def append_record(record):\n    pass\n", encoding="utf-8")
    text = (
        "name: toy\npython: {script: toy_agent.py}\nboundaries:\n"
        "  - {function: FUNCTION, boundary: after_running, call_id: {argument: record, key: id}}\n"
    )
    adapter = tmp_path / "adapter.yaml"
    adapter.write_text(text.replace("FUNCTION", "toy_agent.append_record"), encoding="utf-8")
    assert load_foreign(adapter).rules[0].function == "toy_agent.append_record"
    adapter.write_text(text.replace("FUNCTION", "toy_agent.nothing"), encoding="utf-8")
    with pytest.raises(InputError, match=r"the agent has no function 'toy_agent\.nothing'"):
        load_foreign(adapter)
    # At run time the script is a module of another name; the prefix still names it.
    module = ModuleType(f"{SCRIPT_PREFIX}toy_agent")
    module.append_record = lambda record: None  # type: ignore[attr-defined]
    owner, attr, function = _resolve(module, "toy_agent.append_record", "boundaries[].function")
    assert (owner, attr, function) == (module, "append_record", module.append_record)  # type: ignore[attr-defined]
