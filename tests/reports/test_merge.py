"""``crashmatrix report --merge``: the results files of a sharded run (``pytest --shard=I/N``)
make the report one unsharded run would have written (``reports/merge.py``)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from crashmatrix.harness.front.cli import main
from crashmatrix.reports.matrix import build_matrix
from crashmatrix.reports.merge import MergeError, case_order, merge_results
from crashmatrix.reports.results import NotRun, Results, load_results, write_results

from ..pytest_runs import run_inprocess

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]
MERGED = (
    "send_email/send_once.yaml",
    "send_email/send_response_lost.yaml",
    "approvals/send_email_rejected.yaml",
    "approvals/npm_test_again_no.yaml",
)


def _by_scenario(results: Results) -> tuple[Results, Results]:
    """The fixture's two scenarios as two shards, each with its own not_run entry."""
    paths = sorted({case.scenario_path for case in results.cases})
    shards = []
    for index, path in enumerate(paths):
        gap = NotRun(path, "after_approved", "not_reachable", "reason", ("call",))
        shards.append(
            dataclasses.replace(
                results,
                cases=tuple(case for case in results.cases if case.scenario_path == path),
                seconds=10.0 + index,
                created=f"2026-01-0{index + 1}T00:00:00+00:00",
                not_run=(gap,),
            )
        )
    return shards[0], shards[1]


def test_merged_shards_are_the_one_run_they_were_split_from(results: Results) -> None:
    first, second = _by_scenario(results)
    merged = merge_results([("b.json", second), ("a.json", first)])  # any order of files
    assert merged.cases == tuple(sorted(results.cases, key=case_order))
    assert [gap.scenario_path for gap in merged.not_run] == sorted(
        gap.scenario_path for gap in first.not_run + second.not_run
    )
    assert merged.agent == results.agent and merged.reachable == results.reachable
    assert merged.seconds == 11.0  # side by side: the longest shard
    assert merged.created == "2026-01-02T00:00:00+00:00"
    assert not merged.incomplete
    assert build_matrix(merged).rows == build_matrix(dataclasses.replace(merged, cases=results.cases)).rows


def test_one_interrupted_shard_makes_the_merge_incomplete(results: Results) -> None:
    first, second = _by_scenario(results)
    merged = merge_results([("a", first), ("b", dataclasses.replace(second, incomplete=True))])
    assert merged.incomplete


def test_shards_of_two_agents_are_refused_in_one_line(results: Results) -> None:
    first, second = _by_scenario(results)
    with pytest.raises(
        MergeError, match=r"^report --merge: b\.json is agent 'other', a\.json is agent"
    ) as error:
        merge_results([("a.json", first), ("b.json", dataclasses.replace(second, agent="other"))])
    assert "\n" not in str(error.value)


def test_the_same_shard_given_twice_is_refused(results: Results) -> None:
    first, _ = _by_scenario(results)
    with pytest.raises(
        MergeError, match=r"::clean is in a\.json and in b\.json; give each shard's file once"
    ):
        merge_results([("a.json", first), ("b.json", first)])


def test_shards_that_reach_different_boundaries_are_refused(results: Results) -> None:
    first, second = _by_scenario(results)
    first = dataclasses.replace(first, reachable=("after_running", "after_side_effect"))
    second = dataclasses.replace(second, reachable=("after_running",))
    with pytest.raises(MergeError, match="the shards reach different boundaries"):
        merge_results([("a.json", first), ("b.json", second)])


def test_a_scenario_split_across_two_files_is_refused(results: Results) -> None:
    clean, *rest = results.cases
    one = dataclasses.replace(results, cases=(clean,))
    other = dataclasses.replace(results, cases=tuple(rest))
    with pytest.raises(MergeError, match=r"has cases in a and in b; shards split by scenario"):
        merge_results([("a", one), ("b", other)])


def test_report_merge_writes_the_report_and_says_what_it_merged(
    results: Results, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = _by_scenario(results)
    files = [
        write_results(first, tmp_path / "s1" / "matrix.json"),
        write_results(second, tmp_path / "s2" / "matrix.json"),
    ]
    assert main(["report", "--merge", *map(str, files), "--out", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.startswith("merged 2 results files: ")
    assert load_results(tmp_path / "out" / "matrix.json").cases == tuple(
        sorted(results.cases, key=case_order)
    )
    assert (tmp_path / "out" / "matrix.html").is_file() and (tmp_path / "out" / "matrix.md").is_file()
    assert main(["report", str(files[0]), "--merge", str(files[1])]) == 2
    assert main(["report", "--merge", str(files[0]), str(tmp_path / "none.json")]) == 2
    assert "none.json: no such file" in capsys.readouterr().err


def test_in_ci_the_merged_matrix_is_appended_to_the_job_summary(
    results: Results, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _by_scenario(results)
    files = [write_results(part, tmp_path / f"s{i}.json") for i, part in enumerate((first, second))]
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main(["report", "--merge", *map(str, files), "--out", str(tmp_path / "out")]) == 0
    assert (
        summary.read_text(encoding="utf-8").strip()
        == (tmp_path / "out" / "matrix.md").read_text(encoding="utf-8").strip()
    )


# ---------------------------------------------------------------------------- end to end


def _statuses(results: Results) -> dict[str, str]:
    return {case.node_id: case.status for case in results.cases}


def _cells(results: Results) -> dict[tuple[str, str], object]:
    """Each cell as a reader sees it: its state, its counts, why it has no case, its cases."""
    return {
        (row.scenario_path, cell.column): (
            cell.state,
            cell.tally,
            cell.not_run,
            [c.node_id for c in cell.cases],
        )
        for row in build_matrix(results).rows
        for cell in row.cells
    }


@pytest.mark.slow
def test_two_shards_merged_equal_the_unsharded_run_cell_by_cell(pytester: pytest.Pytester) -> None:
    # Four files of two folders, one of them never reaching after_approved (a refused send):
    # rows with their own reachable and not-run cells, split 2 and 2 (issue 31: the whole of
    # send_email and approvals, 7 files, ran the matrix twice for the same claim).
    for name in MERGED:
        (pytester.path / "scenarios" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "scenarios" / name, pytester.path / "scenarios" / name)
    common = ("scenarios", "-p", "no:cacheprovider", "--no-doctor", "-q")
    whole = run_inprocess(pytester, *common, "--report-dir", "out/whole")
    assert whole.ret in (0, 1), whole.outlines[-20:]
    shards = [
        run_inprocess(pytester, *common, f"--shard={i}/2", "--report-dir", f"out/shard{i}") for i in (1, 2)
    ]
    for shard in shards:
        shard.stdout.fnmatch_lines([f"crashmatrix --shard=?/2: * of {len(MERGED)} files, *"])
    files = [pytester.path / "out" / f"shard{i}" / "matrix.json" for i in (1, 2)]
    parts = [load_results(f) for f in files]
    assert all(part.cases for part in parts)  # both shards ran something
    assert main(["report", "--merge", *map(str, files), "--out", str(pytester.path / "out" / "merged")]) == 0
    unsharded = load_results(pytester.path / "out" / "whole" / "matrix.json")
    merged = load_results(pytester.path / "out" / "merged" / "matrix.json")
    assert len(unsharded.cases) > 50
    assert _statuses(merged) == _statuses(unsharded)
    assert [c.node_id for c in merged.cases] == [c.node_id for c in unsharded.cases]
    assert _cells(merged) == _cells(unsharded)
    assert merged.not_run == unsharded.not_run and merged.reachable == unsharded.reachable
