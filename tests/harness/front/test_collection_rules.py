"""Which YAML files the plugin collects as scenarios (``harness/front/plugin.py``), and the
``--shard`` option end to end.

The rule (``plugin.RULE``): a file that declares the scenario schema in its leading
comments is a scenario wherever pytest finds it; a file with a top-level ``turns:`` or
``model:`` key is one when named on the command line or under ``crashmatrix_paths``
(default ``scenarios`` beside the ini file); any other YAML is left alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.front.explore import render_yaml
from crashmatrix.harness.front.plugin import RULE, is_scenario_text
from crashmatrix.harness.input.mcp_import import contract_to_yaml, contracts_from_mcp

from ...pytest_runs import run_inprocess
from ...scenario_data import DATA, email_once

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[3]
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  model: gpt\n"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# ---------------------------------------------------------------------------- the rule (fast)


def test_every_builtin_and_example_scenario_declares_itself_so_is_collected_anywhere() -> None:
    files = sorted(ROOT.glob("scenarios/*/*.yaml")) + sorted(ROOT.glob("examples/*/scenario*.yaml"))
    assert len(files) > 41
    undeclared = [str(f) for f in files if not is_scenario_text(_read(f), candidate=False)]
    assert undeclared == []


def test_what_explore_writes_declares_itself() -> None:
    text = render_yaml({"name": "found_1", "tools": ["send_email"], "turns": ["x"], "model": []}, "why")
    assert is_scenario_text(text, candidate=False)


def test_contracts_adapters_and_mcp_imports_are_never_scenarios() -> None:
    others = [*ROOT.glob("scenarios/*/contracts/*.yaml"), *ROOT.glob("mock_tools/contracts/*.yaml")]
    others += list(ROOT.glob("examples/*/adapter*.yaml"))
    assert len(others) > 10
    tools = [{"name": "create_ticket", "description": "Create a ticket", "inputSchema": {"type": "object"}}]
    imported = [contract_to_yaml(c) for c in contracts_from_mcp(tools)]
    for text in [*(_read(f) for f in others), *imported]:
        assert not is_scenario_text(text, candidate=True), text[:80]


def test_test_data_scenarios_are_scenarios_where_named_or_configured_only() -> None:
    for path in [DATA / "email_once.yaml", ROOT / "tests/harness/agents/data/note_agent/scenario.yaml"]:
        assert is_scenario_text(_read(path), candidate=True)
        assert not is_scenario_text(_read(path), candidate=False)


def test_a_broken_scenario_is_still_a_scenario_so_its_error_is_shown() -> None:
    # Loaded directly by tests/harness/input/test_broken_files.py; as collected, a misspelt
    # key must still make it a scenario (an error naming file:line), not a silent skip.
    broken = sorted((ROOT / "tests/harness/data/broken").glob("s*.yaml"))
    recognised = [p.name for p in broken if is_scenario_text(_read(p), candidate=True)]
    # s24 is empty, s25 a list, s30 has an empty turns: only what no reader could call one.
    assert set(p.name for p in broken) - set(recognised) <= {"s24_empty_file.yaml", "s25_not_a_mapping.yaml"}
    assert is_scenario_text(email_once(edits=[("turns:", "turnz:")]), candidate=True)


def test_a_yaml_that_is_not_a_scenario_is_not_one_even_where_scenarios_live() -> None:
    assert not is_scenario_text(CONFIGMAP, candidate=True)  # `model:` indented under data:
    assert not is_scenario_text("name: app\nservices: {}\n", candidate=True)
    assert not is_scenario_text("# yaml-language-server: $schema=other.json\nturns: []\n", candidate=True)


def test_the_declaration_counts_only_in_the_leading_comments() -> None:
    line = "# yaml-language-server: $schema=https://example.com/scenario.schema.json\n"
    assert is_scenario_text(line + "name: x\n", candidate=False)
    assert is_scenario_text("\n# a comment\n" + line + "name: x\n", candidate=False)
    assert not is_scenario_text("name: x\n" + line, candidate=False)


# ---------------------------------------------------------------------------- pytest (slow)


def _lines(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines)


@pytest.mark.slow
def test_a_configmap_in_a_scenarios_folder_is_ignored_and_the_scenario_beside_it_collected(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", **{"scenarios/configmap": CONFIGMAP, "scenarios/email": email_once()})
    pytester.makefile(".yaml", **{"deploy/scenarios/configmap": CONFIGMAP})
    result = run_inprocess(pytester, ".", "--co", "-q", "--no-doctor", "-p", "no:cacheprovider")
    assert result.ret == 0, _lines(result)
    assert "configmap" not in _lines(result)
    result.stdout.fnmatch_lines(["scenarios/email.yaml::clean", "*tests collected*"])


@pytest.mark.slow
def test_a_scenario_named_on_the_command_line_is_collected_wherever_it_lives(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", **{"suites/crash/my_scenario": email_once(cover=["after_running"])})
    result = run_inprocess(pytester, "suites/crash/my_scenario.yaml", "--co", "-q", "--no-doctor")
    result.stdout.fnmatch_lines(["suites/crash/my_scenario.yaml::clean", "*tests collected*"])
    # The folder itself is no scenario folder: said, in one line, with the rule.
    folder = run_inprocess(pytester, "suites", "--co", "-q", "--no-doctor")
    assert folder.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    why = [line for line in folder.outlines if line.startswith("crashmatrix: suites ")]
    assert why == [f"crashmatrix: suites holds no scenario, nothing collected ({RULE}: scenarios)"]


@pytest.mark.slow
def test_crashmatrix_paths_in_the_ini_file_makes_a_folder_a_scenario_folder(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", **{"suites/crash/email": email_once(cover=["after_running"])})
    pytester.makefile(".yaml", **{"suites/crash/configmap": CONFIGMAP})
    pytester.makeini("[pytest]\ncrashmatrix_paths = suites/crash\n")
    result = run_inprocess(pytester, "suites", "--co", "-q", "--no-doctor")
    result.stdout.fnmatch_lines(["suites/crash/email.yaml::clean", "*tests collected*"])
    assert "configmap" not in _lines(result) and "crashmatrix: " not in _lines(result)


@pytest.mark.slow
def test_a_yaml_named_on_the_command_line_that_is_no_scenario_says_why_not_not_found(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", **{"k8s/configmap": CONFIGMAP})
    result = run_inprocess(pytester, "k8s/configmap.yaml", "--co", "-q")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(
        ["crashmatrix: k8s/configmap.yaml is not a scenario, nothing collected (a scenario declares*"]
    )
    assert "not found" not in _lines(result) + "\n".join(result.errlines)


@pytest.mark.slow
def test_a_python_only_run_says_nothing_about_scenarios(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    pytester.makefile(".yaml", **{"config/app": "name: app\n"})
    result = run_inprocess(pytester, ".", "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "crashmatrix" not in _lines(result)


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["3/2", "0/2", "x", "1/0"])
def test_a_bad_shard_is_a_one_line_usage_error(pytester: pytest.Pytester, spec: str) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    result = run_inprocess(pytester, f"--shard={spec}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: --shard={spec}: "), result.errlines


@pytest.mark.slow
def test_shards_split_by_file_every_item_in_exactly_one_shard(pytester: pytest.Pytester) -> None:
    for name in "abcde":
        pytester.makepyfile(**{f"test_{name}": "".join(f"def test_{i}():\n    pass\n" for i in range(3))})
    runs = [run_inprocess(pytester, f"--shard={i}/2", "--co", "-q", "-p", "no:cacheprovider") for i in (1, 2)]
    ids = [{line for line in run.outlines if "::" in line} for run in runs]
    assert ids[0] and ids[1] and not ids[0] & ids[1]
    assert len(ids[0] | ids[1]) == 15
    files = [{node.partition("::")[0] for node in shard} for shard in ids]
    assert not files[0] & files[1]  # whole files
    runs[0].stdout.fnmatch_lines(
        ["crashmatrix --shard=1/2: 3 of 5 files, 9 of 15 items (balanced by item count)"]
    )
