"""A framework agent declared in an adapter YAML (``framework:`` + ``factory:``): read with the
same code as kind 2, its boundaries, tools and approvals said by its framework module.

The framework module here is a stand-in (``data/fake_framework``): these tests pin the common
part; the real frameworks' lives are tested in ``tests/harness/agents/frameworks/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.agents import team_life
from crashmatrix.harness.agents.adapter_file import load_foreign
from crashmatrix.harness.agents.foreign import ForeignAdapter
from crashmatrix.harness.errors import InputError

DATA = Path(__file__).parent / "data" / "fake_framework"


@pytest.fixture(autouse=True)
def fake_framework(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(DATA))
    monkeypatch.setitem(team_life.FRAMEWORKS, "langgraph", ("crashmatrix_fake_framework", "langgraph"))


def _adapter(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "adapter.yaml"
    path.write_text(text, encoding="utf-8")
    for name in ("team_factory.py",):
        (tmp_path / name).write_text((DATA / name).read_text(encoding="utf-8"), encoding="utf-8")
    return path


BASE = "name: team\nframework: langgraph\nfactory: team_factory:build\n"


def test_a_framework_yaml_is_read_as_kind_2_with_the_framework_store_as_its_session(tmp_path: Path) -> None:
    spec = load_foreign(_adapter(tmp_path, BASE + "options: {durability: async}\n"))
    assert (spec.kind, spec.framework, spec.module, spec.main) == (
        "framework",
        "langgraph",
        "team_factory",
        "build",
    )
    assert spec.tools == "agent"  # the team's own tools, unless it says harness
    assert spec.options == {"durability": "async"}
    assert spec.source.kind == "reader" and spec.source.reader == "crashmatrix_fake_framework:read_records"
    assert spec.keeps_ledger is False


@pytest.mark.parametrize("key", ["session: {path: s.jsonl}", "input: {prompt: '> '}", "cwd: here"])
def test_what_a_framework_agent_cannot_take_is_one_line_naming_the_key(tmp_path: Path, key: str) -> None:
    with pytest.raises(InputError) as error:
        load_foreign(_adapter(tmp_path, BASE + key + "\n"))
    message = str(error.value)
    assert "\n" not in message
    assert f"adapter.yaml:4:1: {key.partition(':')[0]}: not for a framework" in message


def test_an_option_the_framework_does_not_take_is_refused_naming_what_it_takes(tmp_path: Path) -> None:
    with pytest.raises(
        InputError, match=r"options\.colour: langgraph takes no option 'colour' \(it takes: durability\)"
    ):
        load_foreign(_adapter(tmp_path, BASE + "options: {colour: red}\n"))


def test_a_rule_may_name_an_attribute_of_a_module_the_team_imports(tmp_path: Path) -> None:
    text = (
        BASE
        + "boundaries:\n  - {function: json.dumps, boundary: after_running,\n"
        + "     call_id: {argument: obj, key: id}}\n"
    )
    assert load_foreign(_adapter(tmp_path, text)).rules[0].function == "json.dumps"
    with pytest.raises(InputError, match=r"the agent has no function 'nothing\.dumps'"):
        load_foreign(_adapter(tmp_path, text.replace("json.dumps", "nothing.dumps")))


def test_the_adapter_takes_the_frameworks_boundaries_and_the_tools_the_built_agent_has(
    tmp_path: Path,
) -> None:
    adapter = ForeignAdapter(load_foreign(_adapter(tmp_path, BASE)))
    # The framework's seams, and no loopback edge for the reply it already reaches.
    assert adapter.boundaries == (
        "after_model_reply",
        "after_running",
        "after_side_effect",
        "after_tool_result",
    )
    assert adapter.loopback_edges == frozenset()
    assert adapter.unreachable == {"before_tool_result": "the fake saves a call's result with the next reply"}
    assert adapter.torn_write_unreachable == "the fake's store is SQLite"
    assert adapter.power_session(tmp_path) == "the fake's store is SQLite"
    assert "json" in adapter.preload
    # No catalogue: the suite's tools are the ones the built agent has; any other is n.a.
    tools = adapter.capabilities.tools
    assert tools.has("send_email") and tools.has("create_order")
    assert not tools.has("read_file") and tools.missing(["read_file"]) == ["read_file"]
    assert adapter.capabilities.approvals is False
    assert adapter.dialect.tools == tools


def test_a_catalogue_is_the_teams_word_on_its_tools(tmp_path: Path) -> None:
    text = BASE + "catalogue:\n  send_email: {name: send_mail}\n"
    adapter = ForeignAdapter(load_foreign(_adapter(tmp_path, text)))
    tools = adapter.capabilities.tools
    assert tools.has("send_email") and not tools.has("create_order")
    assert tools.agent_name("send_email") == "send_mail"


def test_no_ledger_is_said_in_the_frameworks_words(tmp_path: Path) -> None:
    adapter = ForeignAdapter(load_foreign(_adapter(tmp_path, BASE)))
    assert adapter.keeps_ledger is False
