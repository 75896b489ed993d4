"""Merging the results files of a sharded run (``pytest scenarios/ --shard=I/N`` on N CI
jobs) into the one results file a single unsharded run would have written.

Each shard runs whole scenarios (``harness.plan.shards``), so a scenario's cases and its
``not_run`` entries come from exactly one file; merging is a union, ordered as the
collector orders one run's cases. What cannot be a union is refused, one line naming the
files: shards of different agents, a case or a scenario in two files (the same shard given
twice, or files of two different runs), different reachable boundaries.

``merge_results`` is pure; ``load_merged`` reads the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from crashmatrix.harness.errors import InputError
from crashmatrix.reports.matrix import COLUMNS
from crashmatrix.reports.results import CaseRecord, Results, load_results

__all__ = ["MergeError", "case_order", "load_merged", "merge_results"]


class MergeError(InputError):
    """Results files that are not shards of one run; the message names them."""


def case_order(case: CaseRecord) -> tuple[str, int, str]:
    """One run's order of cases (``reports.collector.MatrixReporter.results``): by scenario,
    by matrix column, by node id."""
    columns = {column: index for index, column in enumerate(COLUMNS)}
    return (case.scenario_path, columns.get(case.boundary, len(columns)), case.node_id)


def merge_results(parts: Sequence[tuple[str, Results]]) -> Results:
    """The union of ``(name, results)`` shards; ``name`` (the file) is for the messages."""
    if not parts:
        raise MergeError("report --merge: give the results files of the shards (shard*/matrix.json)")
    first_name, first = parts[0]
    for name, results in parts[1:]:
        if results.agent != first.agent:
            raise MergeError(
                f"report --merge: {name} is agent {results.agent!r}, {first_name} is agent "
                f"{first.agent!r}; shards of one run test one agent (use --compare for two)"
            )
    owner: dict[str, str] = {}  # scenario path -> the file its cases came from
    seen: dict[str, str] = {}  # node id -> file
    for name, results in parts:
        for case in results.cases:
            if case.node_id in seen:
                raise MergeError(
                    f"report --merge: {case.node_id} is in {seen[case.node_id]} and in {name}; "
                    "give each shard's file once"
                )
            seen[case.node_id] = name
            if owner.setdefault(case.scenario_path, name) != name:
                raise MergeError(
                    f"report --merge: scenario {case.scenario_path} has cases in {owner[case.scenario_path]} "
                    f"and in {name}; shards split by scenario, so these are not shards of one run"
                )
    reachable = {results.reachable for _, results in parts if results.reachable is not None}
    if len(reachable) > 1:
        named = "; ".join(f"{name}: {', '.join(r.reachable or ())}" for name, r in parts if r.reachable)
        raise MergeError(f"report --merge: the shards reach different boundaries ({named})")
    not_run = sorted(
        (gap for _, results in parts for gap in results.not_run), key=lambda gap: gap.scenario_path
    )  # stable: within a scenario, the order its shard wrote
    return Results(
        agent=first.agent,
        cases=tuple(sorted((case for _, r in parts for case in r.cases), key=case_order)),
        # The latest shard's time; the wall time of jobs that ran side by side is the longest.
        created=max(results.created for _, results in parts),
        seconds=max(results.seconds for _, results in parts),
        # One interrupted shard leaves cases unrun: the whole is partial too.
        incomplete=any(results.incomplete for _, results in parts),
        reachable=next(iter(reachable), None),
        not_run=tuple(not_run),
    )


def load_merged(paths: Sequence[Path]) -> Results:
    """Read each results file (a bad one is a one-line ``ResultsFileError``) and merge them."""
    return merge_results([(str(path), load_results(path)) for path in paths])
