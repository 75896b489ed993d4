"""The results file: schema, round trip, one-line errors, world diffs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from crashmatrix.reports.errors import ResultsFileError
from crashmatrix.reports.results import (
    SCHEMA_PATH,
    CaseRecord,
    Results,
    load_results,
    results_to_json,
    with_world_diffs,
    write_results,
)

from .conftest import FIXTURE


def _validate(path: Path) -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(json.loads(path.read_text(encoding="utf-8")))


def test_the_schema_ships_with_the_package() -> None:
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    assert '"results.schema.json"' in text
    assert SCHEMA_PATH.parent.name == "reports"


def test_a_written_results_file_fits_the_schema_and_reads_back_equal(
    results: Results, tmp_path: Path
) -> None:
    path = write_results(results, tmp_path / "matrix.json")
    _validate(path)
    again = load_results(path)
    assert again == results
    assert results_to_json(again) == results_to_json(results)


def test_the_written_file_holds_one_case_per_line(results: Results, tmp_path: Path) -> None:
    lines = write_results(results, tmp_path / "m.json").read_text(encoding="utf-8").splitlines()
    assert sum(line.startswith('{"node_id":') for line in lines) == len(results.cases)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not JSON"),
        ('{"format": "crashmatrix-results", "version": 1, "agent": "x"}', "'cases' is a required property"),
        ('{"hello": 1}', "is this a crashmatrix results file?"),
    ],
)
def test_a_bad_results_file_is_one_line_naming_the_file_and_the_problem(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ResultsFileError) as caught:
        load_results(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert problem in message
    assert "\n" not in message


def test_a_bad_case_field_is_named_by_its_place_in_the_file(
    raw_results: dict[str, Any], tmp_path: Path
) -> None:
    raw_results["cases"][2]["status"] = "exploded"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw_results), encoding="utf-8")
    with pytest.raises(ResultsFileError, match=r"cases\[2\]\.status: 'exploded' is not one of"):
        load_results(path)


def test_a_missing_results_file_says_so() -> None:
    with pytest.raises(ResultsFileError, match="no such file"):
        load_results(FIXTURE.with_name("absent.json"))


def _case(point: str, boundary: str, world: dict[str, Any]) -> CaseRecord:
    return CaseRecord(
        node_id=f"s.yaml::{point}",
        scenario="s",
        scenario_path="scenarios/s.yaml",
        tools=("send_email",),
        idempotency=("non_idempotent",),
        point=point,
        boundary=boundary,
        status="passed",
        indeterminate=False,
        seconds=0.1,
        lives=2,
        repro="crashmatrix run scenarios/s.yaml",
        observed={"outcome": {}, "ledger": {}, "code": {}, "world": world},
    )


def test_a_world_diff_is_what_differs_from_the_clean_case_of_the_same_scenario() -> None:
    clean = _case("clean", "clean", {"emails": 1, "files": {"a.txt": "x"}})
    crash = _case(
        "after_side_effect[c]", "after_side_effect", {"emails": 2, "files": {"a.txt": "x", "b": "y"}}
    )
    other = dataclasses.replace(crash, scenario_path="scenarios/other.yaml", node_id="o")
    diffed = with_world_diffs([crash, clean, other])
    assert diffed[0].world_diff == (
        {"key": "emails", "clean": 1, "observed": 2},
        {"key": "files[b]", "clean": None, "observed": "y"},
    )
    assert diffed[1].world_diff == ()  # the clean case is the baseline
    assert diffed[2].world_diff == ()  # no clean case for that scenario: no guess


def test_the_package_exports_a_sorted_public_surface() -> None:
    from crashmatrix import reports

    assert reports.__all__ == sorted(reports.__all__)
    assert all(hasattr(reports, name) for name in reports.__all__)


def test_a_record_names_the_crashed_calls_tool_and_that_calls_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The class the scorecard files a case under is the crashed call's under its contract
    for its arguments (ls is read-only though run_command is declared non-idempotent);
    a clean case names none."""
    from crashmatrix.harness.input.scenario import load_scenario
    from crashmatrix.harness.verdict.result import CaseResult
    from crashmatrix.harness.verdict.verdict import Verdict
    from crashmatrix.reports.results import record_from_result, results_from_json

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    scenario = load_scenario(root / "scenarios" / "run_command" / "ls_replay.yaml")

    def record(point: str, boundary: str) -> CaseRecord:
        verdict = Verdict("passed", None, {})
        result = CaseResult(scenario, point, boundary, verdict, 1.0, 2, Path("/tmp/c"), "x")
        return record_from_result(result, f"ls_replay.yaml::{point}")

    crashed = record("power@after_running[call_ls]", "power_loss")
    named = (crashed.crash_call, crashed.crash_tool, crashed.crash_class)
    assert named == ("call_ls", "run_command", "idempotent")
    assert crashed.idempotency == ("non_idempotent",)  # the scenario's tools, as declared
    clean = record("clean", "clean")
    assert (clean.crash_call, clean.crash_tool, clean.crash_class) == ("", "", "")
    raw = results_to_json(Results("x", (crashed, clean)))
    assert results_from_json(raw).cases == (crashed, clean)  # fits the schema, reads back
