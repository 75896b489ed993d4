"""Kind 2 in one process: interception replaces a tool function on the module object only,
maps its arguments and shapes its result; fsyncs of the agent become probe moments; each
adapter rule says in the trace when it first acted, and one that never did is named with why
(the dict that still holds the original function)."""

from __future__ import annotations

import hashlib
import json
import os
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.agents.adapter_file import BoundaryRule, ForeignSpec, Intercept, Where
from crashmatrix.harness.agents.python_agent import (
    RULE_FIRED,
    Marks,
    held_by,
    import_agent,
    install_boundaries,
    install_intercepts,
    probing_fsyncs,
    silent_rules,
)

AGENT = """
def send_message(recipient, title, text, call=None):
    raise RuntimeError("the real mail server must never be reached in a test")


def main():
    return send_message("a@example.com", "Hi", "Hello", call="call_7")
"""


@pytest.fixture
def agent(tmp_path: Path) -> tuple[types.ModuleType, Path]:
    script = tmp_path / "mail_agent.py"
    script.write_text(AGENT, encoding="utf-8")
    spec = ForeignSpec(path=tmp_path / "adapter.yaml", name="mail", kind="python", script=script)
    return import_agent(spec), script


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_intercepted_function_runs_the_mock_tool_with_mapped_arguments(
    agent: tuple[types.ModuleType, Path],
) -> None:
    module, script = agent
    before = _digest(script)
    calls: list[tuple[str, Mapping[str, Any], str]] = []

    def run_tool(tool: str, arguments: Mapping[str, Any], call_id: str, key: str | None) -> Mapping[str, Any]:
        calls.append((tool, dict(arguments), call_id))
        return {"ok": True, "status": "succeeded"}

    marks = Marks(lambda boundary, call_id: None)
    intercept = Intercept(
        "send_email",
        "send_message",
        {"to": "recipient", "subject": "title", "body": "text"},
        returns="json",
        call_id=("call", ""),
    )
    install_intercepts(module, [intercept], marks, run_tool, script.parent)
    assert json.loads(module.main()) == {"ok": True, "status": "succeeded"}
    assert calls == [("send_email", {"to": "a@example.com", "subject": "Hi", "body": "Hello"}, "call_7")]
    assert _digest(script) == before  # the agent's file is untouched


def test_without_a_call_id_argument_the_last_boundary_call_is_used(
    agent: tuple[types.ModuleType, Path],
) -> None:
    module, script = agent
    seen: list[str] = []
    marks = Marks(lambda boundary, call_id: None)
    marks.last_call_id = "call_from_boundary"
    install_intercepts(
        module,
        [Intercept("send_email", "send_message", {"to": "recipient"})],
        marks,
        lambda tool, arguments, call_id, key: seen.append(call_id) or {"ok": True},
        script.parent,
    )
    assert module.send_message("b@example.com", "t", "x") == {"ok": True}
    assert seen == ["call_from_boundary"]


def test_a_boundary_rule_on_an_intercepted_function_wraps_the_replacement(
    agent: tuple[types.ModuleType, Path],
) -> None:
    module, script = agent
    order: list[str] = []
    marks = Marks(lambda boundary, call_id: order.append(f"{boundary}[{call_id}]"))

    def run_tool(tool: str, arguments: Mapping[str, Any], call_id: str, key: str | None) -> Mapping[str, Any]:
        order.append("mock tool")
        return {"ok": True}

    install_intercepts(
        module,
        [Intercept("send_email", "send_message", {}, call_id=("call", ""))],
        marks,
        run_tool,
        script.parent,
    )
    rule = BoundaryRule("send_message", "after_side_effect", call_id=("call", ""))
    install_boundaries(module, [rule], marks.hook, marks)
    module.main()
    assert order == ["mock tool", "after_side_effect[call_7]"]


def test_the_key_the_function_was_given_reaches_the_mock_tool(tmp_path: Path) -> None:
    script = tmp_path / "order_agent.py"
    script.write_text(
        "def place(item, qty, key):\n    raise RuntimeError('real service')\n", encoding="utf-8"
    )
    module = import_agent(ForeignSpec(path=tmp_path / "a.yaml", name="o", kind="python", script=script))
    keys: list[str | None] = []
    install_intercepts(
        module,
        [Intercept("create_order", "place", {"item": "item", "quantity": "qty"}, key="key")],
        Marks(lambda boundary, call_id: None),
        lambda tool, arguments, call_id, key: keys.append(key) or {"ok": True},
        tmp_path,
    )
    module.place("chair", 2, "k-random-1")
    assert keys == ["k-random-1"]


def test_fsyncs_are_probe_moments_only_inside_the_block(tmp_path: Path) -> None:
    class Probe:
        def __init__(self) -> None:
            self.seen: list[str] = []

        def probe(self, where: str) -> None:
            self.seen.append(where)

    probe = Probe()
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        with probing_fsyncs(probe):  # type: ignore[arg-type]
            os.fsync(fd)
            os.fdatasync(fd)
        os.fsync(fd)
    finally:
        os.close(fd)
    assert probe.seen == ["fsync", "fsync"]


# -- which rule fired, and why one never did ------------------------------------------------

DISPATCH = """
def send_message(recipient, title, text, call=None):
    return {"ok": True}


def archive(call=None):
    return {"ok": True}


ALIAS = send_message
HANDLERS = {"send": send_message}
PIPELINE = [archive, send_message]


def main():
    return HANDLERS["send"]("a@example.com", "Hi", "Hello", call="call_7")


def main_by_name():
    return send_message("a@example.com", "Hi", "Hello", call="call_7")
"""

SEND = BoundaryRule("send_message", "after_side_effect", call_id=("call", ""), position="a.yaml:20:5")


def _dispatching(tmp_path: Path) -> types.ModuleType:
    script = tmp_path / "dispatch_agent.py"
    script.write_text(DISPATCH, encoding="utf-8")
    return import_agent(ForeignSpec(path=tmp_path / "a.yaml", name="d", kind="python", script=script))


def test_the_original_function_is_found_where_the_agent_still_holds_it(tmp_path: Path) -> None:
    module = _dispatching(tmp_path)
    original = module.send_message
    assert held_by(module, original, "send_message") == ["ALIAS", "HANDLERS['send']", "PIPELINE[1]"]
    assert held_by(module, module.archive, "archive") == ["PIPELINE[0]"]


def test_a_rule_on_a_function_called_through_a_dispatch_dict_never_fires_and_says_where_it_is_held(
    tmp_path: Path,
) -> None:
    module = _dispatching(tmp_path)
    trace: list[dict[str, Any]] = []
    hits: list[str] = []
    marks = Marks(lambda boundary, call_id: hits.append(f"{boundary}[{call_id}]"), trace.append)
    install_boundaries(module, [SEND], marks.hook, marks)
    assert module.main() == {"ok": True}
    assert hits == []  # the dict's function is the original: the wrapper never ran
    (silent,) = silent_rules(trace)
    assert (silent.rule, silent.boundary, silent.function) == (
        "a.yaml:20:5",
        "after_side_effect",
        "send_message",
    )
    assert "never called through its module attribute" in silent.why
    assert "HANDLERS['send']" in silent.why and "ALIAS" in silent.why
    assert silent.describe().startswith(
        "boundary rule a.yaml:20:5 (send_message -> after_side_effect) never fired"
    )
    # Called by its module attribute, it fires, once in the trace however often it runs.
    module.main_by_name()
    module.main_by_name()
    assert hits == ["after_side_effect[call_7]"] * 2
    assert [e for e in trace if e["event"] == RULE_FIRED] == [
        {"event": RULE_FIRED, "rule": "a.yaml:20:5", "boundary": "after_side_effect"}
    ]
    assert silent_rules(trace) == []


def test_a_rule_whose_where_never_held_or_that_found_no_call_id_says_so(tmp_path: Path) -> None:
    module = _dispatching(tmp_path)
    trace: list[dict[str, Any]] = []
    marks = Marks(lambda boundary, call_id: None, trace.append)
    picky = BoundaryRule(
        "archive", "after_tool_result", where=(Where("call", "", "equals", "call_9"),), position="a.yaml:30:5"
    )
    no_id = BoundaryRule("send_message", "after_side_effect", position="a.yaml:40:5")  # no call_id
    install_boundaries(module, [picky, no_id], marks.hook, marks)
    module.archive(call="call_7")
    module.main_by_name()
    why = {rule.rule: (rule.why, rule.conditional) for rule in silent_rules(trace)}
    assert "archive was called, but this rule's where: never held" in why["a.yaml:30:5"][0]
    assert "no call id was found" in why["a.yaml:40:5"][0]
    # Only the first may be waiting for a condition the case lacked.
    assert (why["a.yaml:30:5"][1], why["a.yaml:40:5"][1]) == (True, False)


def test_an_intercept_that_never_ran_is_silent_and_one_that_ran_fired(tmp_path: Path) -> None:
    module = _dispatching(tmp_path)
    trace: list[dict[str, Any]] = []
    marks = Marks(lambda boundary, call_id: None, trace.append)
    intercepts = [
        Intercept("send_email", "send_message", {}, position="a.yaml:50:3"),
        Intercept("create_order", "archive", {}, position="a.yaml:55:3"),
    ]
    install_intercepts(
        module, intercepts, marks, lambda tool, arguments, call_id, key: {"ok": True}, tmp_path
    )
    module.archive()
    module.main()  # through HANDLERS: the original, never the mock tool
    (silent,) = silent_rules(trace)
    assert (silent.rule, silent.kind, silent.boundary) == ("a.yaml:50:3", "intercept", "during_side_effect")
    assert "HANDLERS['send']" in silent.why


def test_looking_for_holders_resolves_no_module_outside_a_folder_named_like_the_agents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Resolving every loaded module's path for every rule (a framework's 2,000 modules) was
    # about a second of each kind-2 life; only a directory of the folder's name can hold one.
    from crashmatrix.harness.agents import python_agent

    module = _dispatching(tmp_path)
    resolved: list[Path] = []
    real = Path.resolve

    def counting(self: Path, strict: bool = False) -> Path:
        resolved.append(self)
        return real(self, strict)

    monkeypatch.setattr(Path, "resolve", counting)
    monkeypatch.setattr(python_agent, "_RESOLVED", {})
    assert held_by(module, module.send_message, "send_message") == [
        "ALIAS",
        "HANDLERS['send']",
        "PIPELINE[1]",
    ]
    assert [p for p in resolved if p.name != tmp_path.name] == [Path(module.__file__)]


def test_an_agent_module_imports_its_own_siblings_though_another_adapters_folder_came_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from crashmatrix.harness.agents.adapter_file import load_foreign
    from crashmatrix.harness.agents.python_agent import import_agent

    for team in ("a", "b"):
        folder = tmp_path / team
        folder.mkdir()
        (folder / "sibling_of_team.py").write_text(f"VALUE = {team!r}\n", encoding="utf-8")
        (folder / f"team_{team}_agent.py").write_text(
            "import sibling_of_team\nVALUE = sibling_of_team.VALUE\ndef main():\n    pass\n", encoding="utf-8"
        )
        (folder / "adapter.yaml").write_text(
            f"name: {team}\npython: {{module: team_{team}_agent}}\n", encoding="utf-8"
        )
    monkeypatch.setattr(sys, "path", [str(tmp_path / "a"), str(tmp_path / "b"), *sys.path])
    try:
        assert import_agent(load_foreign(tmp_path / "b" / "adapter.yaml")).VALUE == "b"
    finally:
        for name in ("sibling_of_team", "team_a_agent", "team_b_agent"):
            sys.modules.pop(name, None)
