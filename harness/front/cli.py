"""``crashmatrix`` command line: the only module that prints; library errors become one line
and exit status 2 here, never a traceback.

    crashmatrix run FILE [--crash [power@]POINT [--second POINT]] [--keep DIR]   one case, or the whole matrix
    crashmatrix run FILE --crash power@POINT --power-outcome N   another legal state of that power loss
    crashmatrix run FILE --crash clean|recovery@POINT   the clean case alone, or one depth-2 item
    crashmatrix run FILE --crash double@POINT   two lives resuming that crash at once
    crashmatrix run FILE::CASE                           the same, by the node id pytest prints
    crashmatrix points FILE                             the crash points a clean run records
    crashmatrix validate FILE...                        check scenario / contract / adapter files
    crashmatrix import-mcp TOOLS.json --out DIR         contracts from an MCP tools/list result
    crashmatrix import-mcp --server CMD|--url URL --out DIR   ... read from a live MCP server
    crashmatrix report RESULTS.json [--out DIR]         re-render a run's pass matrix
    crashmatrix report --merge S1.json S2.json [--out DIR]  one report from a sharded run's files
    crashmatrix report --compare A.json B.json [...]    runs side by side, differences marked
    crashmatrix eval --agent ADAPTER [-n N] [--out DIR] the built-in suite against an agent: its scorecard
    crashmatrix mutants [--mutant NAME ...] [--full]     the kill matrix: every mutant must die
    crashmatrix explore [--examples N] [--seed S] [--out DIR]   generated conversations and crashes
    crashmatrix doctor --agent ADAPTER [--json]          plant each check's fault: which checks fire
    crashmatrix schema adapter|scenario|contract|results [--path]   a file kind's JSON Schema
    crashmatrix init AGENT.py [--out FILE] [--no-run]    write a commented adapter by reading the agent
    crashmatrix mcp-serve --life URL [--http HOST:PORT]  a life's tools as an MCP server (stdio or HTTP)
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from crashmatrix.harness.core.boundaries import CrashPoint, parse_point
from crashmatrix.harness.core.double_resume import DOUBLE_PREFIX
from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS, died_on_fault_note
from crashmatrix.harness.errors import CrashmatrixError, InputError
from crashmatrix.harness.plan.schedule import CLEAN, POWER, RECOVERY

if TYPE_CHECKING:
    from crashmatrix.harness.core.scenario import Scenario
    from crashmatrix.harness.input.mcp_import import McpImport

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

# What ``validate`` reads a file as, by its top-level keys: a scenario has turns: and model:;
# an adapter file has python:, command: or framework: (its kind) or boundaries: (which only it has); any
# other file is a contract. An adapter's yaml-language-server line naming its schema counts too,
# so an adapter missing python: and command: is told that, not read as a contract.
_SCENARIO_KEYS = re.compile(r"^(?:turns|model):", re.MULTILINE)
_ADAPTER_KEYS = re.compile(
    r"^(?:python|command|framework|boundaries):|^#.*\$schema=\S*adapter\.schema\.json", re.MULTILINE
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crashmatrix", description="Crash-matrix evals for tool-running agents."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    # Commands with their own parsers (in their modules); listed here so --help shows them.
    for name, text in DELEGATED_HELP.items():
        delegated = sub.add_parser(name, help=text, add_help=False)
        delegated.add_argument("rest", nargs=argparse.REMAINDER)
    run = sub.add_parser("run", help="run one crash case, or a scenario's whole matrix")
    run.add_argument(
        "file",
        help="a scenario file, or a case's pytest node id (FILE::CASE, e.g. "
        "send_once.yaml::recovery@after_running[call_mail]) for that one case",
    )
    run.add_argument(
        "--crash",
        help="point id (after_running[call_1]), a boundary name (its first point), "
        "power@POINT for a power loss there, recovery@POINT for a crash there and then at "
        "each point of the recovery, double@POINT for two lives resuming that crash at once, "
        "a tool-side case (tool_server_died[call_1]: the MCP server fails that call), or clean "
        "for the clean case alone",
    )
    run.add_argument("--second", help="also crash at this point id while the agent recovers (depth 2)")
    run.add_argument(
        "--power-outcome",
        type=int,
        metavar="N",
        help="with --crash power@POINT: leave legal outcome N of the power loss instead of 0, the "
        "pessimistic one (only what was synced); the last is the plain SIGKILL's (docs/persistence.md)",
    )
    run.add_argument(
        "--keep",
        type=Path,
        help="keep case directories here (session JSONL, world, trace); default: a case named with "
        "--crash is kept in a new temporary directory, the whole matrix's are removed",
    )
    run.add_argument("--agent", default="reference")
    run.add_argument("--isolation", choices=("fork", "spawn"), default="fork")
    run.add_argument("--no-recovery-crashes", action="store_true")
    run.add_argument(
        "--recovery-torn-writes",
        action="store_true",
        help="also tear each session line the recovering agent appends (as the scenario key "
        "recovery_torn_writes: true)",
    )
    run.add_argument(
        "--no-power-loss",
        action="store_true",
        help="the whole matrix without its power@P cases (as pytest's --no-power-loss)",
    )
    run.add_argument(
        "--no-tool-side-faults",
        action="store_true",
        help="the whole matrix without its tool-side cases (as pytest's --no-tool-side-faults)",
    )
    run.add_argument(
        "--no-double-resume",
        action="store_true",
        help="the whole matrix without its double@P cases (as pytest's --no-double-resume)",
    )
    points = sub.add_parser("points", help="list the crash points a clean run records")
    points.add_argument("file", type=Path)
    points.add_argument("--agent", default="reference")
    validate = sub.add_parser("validate", help="check scenario, contract and adapter files")
    validate.add_argument("files", type=Path, nargs="+")
    mcp = sub.add_parser(
        "import-mcp", help="write contracts from an MCP tools/list JSON result, or a live server's"
    )
    mcp.add_argument("tools", type=Path, nargs="?", help="a saved tools/list result (JSON)")
    mcp.add_argument(
        "--server",
        metavar="CMD",
        help="start this MCP server (a command line, split as a shell would; {workspace} is an empty "
        "temporary directory) and read its tools/list",
    )
    mcp.add_argument("--url", help="read the tools/list of the MCP server at this streamable HTTP URL")
    mcp.add_argument("--out", type=Path, required=True)
    mcp.add_argument("--trust-annotations", action="store_true")
    report = sub.add_parser("report", help="render the pass matrix from a results file (matrix.json)")
    report.add_argument("results", type=Path, nargs="?", help="a results file written by pytest scenarios/")
    report.add_argument(
        "--compare", type=Path, nargs="+", metavar="RESULTS", help="two results files or more, side by side"
    )
    report.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="RESULTS",
        help="the results files of a sharded run (pytest --shard=I/N): one report, as one run's",
    )
    report.add_argument("--out", type=Path, default=None, help="output directory (default: reports/latest)")
    schema = sub.add_parser("schema", help="print the JSON Schema of an input file (for editors and CI)")
    schema.add_argument("kind", choices=sorted(SCHEMAS), help="which file's schema")
    schema.add_argument(
        "--path", action="store_true", help="print where the installed schema file is, for a $schema line"
    )
    return parser


# ``crashmatrix schema KIND``: the schema files as installed (package data), by what they check.
SCHEMAS = {
    "adapter": ("crashmatrix.harness.input", "schemas/adapter.schema.json"),
    "scenario": ("crashmatrix.harness.input", "schemas/scenario.schema.json"),
    "contract": ("crashmatrix.harness.input", "schemas/contract.schema.json"),
    "results": ("crashmatrix.reports", "results.schema.json"),
}


def _schema(args: argparse.Namespace) -> int:
    """The schema itself (``> adapter.schema.json`` beside a team's adapter), or with ``--path``
    the installed file: a ``# yaml-language-server: $schema=`` line that needs no checkout."""
    import importlib.resources

    package, name = SCHEMAS[args.kind]
    resource = importlib.resources.files(package).joinpath(name)
    if args.path:
        with importlib.resources.as_file(resource) as path:
            print(path)
    else:
        print(resource.read_text(encoding="utf-8"), end="")
    return EXIT_OK


def _resolve_point(spec: str, points: Sequence[CrashPoint]) -> CrashPoint:
    for point in points:
        if point.id == spec:
            return point
    for point in points:
        if point.boundary == spec:
            return point
    known = ", ".join(p.id for p in points) or "none"
    raise InputError(f"--crash {spec!r}: the clean run never reaches it; points: {known}")


def _case_of(args: argparse.Namespace) -> tuple[Path, str | None]:
    """The scenario file and the case (``--crash``) asked for: ``FILE --crash CASE`` or a
    node id ``FILE::CASE`` as pytest prints it (its case is the item name, so the node id
    of a failed item reruns just that item)."""
    file, sep, case = str(args.file).partition("::")
    if not sep:
        return Path(file), args.crash
    if args.crash:
        raise InputError(f"{args.file!r} names its case already; give FILE::CASE or FILE --crash CASE")
    if not case:
        raise InputError(f"{args.file!r}: nothing after '::'; write FILE::CASE (CASE as pytest names it)")
    return Path(file), case


def _run(args: argparse.Namespace) -> int:
    from crashmatrix.harness.agents.loading import load_adapter
    from crashmatrix.harness.input.scenario import load_scenario

    file, crash = _case_of(args)
    crash = crash or ""
    recovery_item = crash.startswith(RECOVERY)
    if args.second and recovery_item:
        raise InputError(
            f"--second with --crash {crash}: recovery@ already crashes at each point of the "
            "recovery; write --crash POINT --second POINT for one of them"
        )
    if args.power_outcome is not None and not crash.startswith(POWER):
        raise InputError(
            f"--power-outcome {args.power_outcome} needs --crash power@POINT: only a power loss has outcomes"
        )
    if args.power_outcome is not None and args.power_outcome < 0:
        raise InputError(f"--power-outcome {args.power_outcome}: write 0 (the pessimistic outcome) or more")
    if args.second and (not crash or crash == CLEAN):
        raise InputError("--second needs --crash: the second crash happens while recovering from the first")
    if args.second and crash.startswith(DOUBLE_PREFIX):
        raise InputError(
            f"--second with --crash {crash}: the two lives resuming at once are the case; drop --second"
        )
    if args.second and crash.partition("[")[0] in TOOL_SIDE_KINDS:
        raise InputError(
            f"--second with --crash {crash}: a tool-side fault kills no agent, so there is no "
            "recovery to crash; drop --second"
        )
    second = parse_point(args.second) if args.second else None
    scenario = load_scenario(file)
    if args.recovery_torn_writes and scenario.recovery_crashes:
        scenario = dataclasses.replace(scenario, recovery_torn_writes=True)
    adapter = load_adapter(args.agent)  # a bad --agent fails here, before anything runs
    from crashmatrix.harness.lives.postgres import ensure_servers

    ensure_servers(adapter)  # a store's server (a real PostgreSQL), inherited by every life
    from crashmatrix.harness.front.doctor import blind_checks

    blind_checks(args.agent)  # what a cached doctor found blind on it: n.a. in its verdicts too
    from crashmatrix.harness.lives.casedir import templates_under
    from crashmatrix.harness.lives.power import chosen_outcome

    # cut_power, in this process, leaves that outcome of each power loss (0 when not told).
    with chosen_outcome(args.power_outcome or 0):
        if args.keep is not None:
            # Absolute: a life works in its case's workspace, where a relative path means another place.
            args.keep = args.keep.absolute()
            return _run_in(args, scenario, crash, second, args.keep)
        if crash:
            # One case asked for by name (a rerun line): kept, in a new directory of its own,
            # so two reruns on one machine never share one.
            args.keep = Path(tempfile.mkdtemp(prefix="crashmatrix-case-"))
            return _run_in(args, scenario, crash, second, args.keep)
        # The whole matrix without --keep: its case directories are scratch, removed however
        # the run ends (the failure text says so). A janitor owns the directory, so even a
        # SIGKILLed run leaves nothing in $TMPDIR (its lives die with it: parent_death).
        from crashmatrix.harness.lives.janitor import temporary_directory

        with temporary_directory("crashmatrix-run-") as made:
            base = Path(made)
            templates_under(base / "templates")  # one directory to remove, however the run ends
            try:
                return _run_in(args, scenario, crash, second, base)
            except KeyboardInterrupt:
                # Its lives run on until their fork server stops (at exit), writing into the case
                # directories removed below: a file made behind the removal's walk kept the run's
                # directory in $TMPDIR (1 in 12 SIGTERMs). Stopped first, they die with it.
                from crashmatrix.harness.lives.forkserver import stop_all

                stop_all()
                raise
            finally:
                _discard(base)


def _discard(base: Path) -> None:
    """Remove a run's scratch directory (a seam: a test looks inside before it goes), and the
    server databases of its cases (a team's server keeps nothing of the run)."""
    from crashmatrix.harness.lives.postgres import drop_case_databases

    drop_case_databases(base)
    # A life killed just now may still finish the one call it was making (a file created
    # behind the walk): walked again until nothing is left, for a few seconds at most.
    for _ in range(50):
        shutil.rmtree(base, ignore_errors=True)
        if not base.exists():
            return
        time.sleep(0.05)


def _run_in(
    args: argparse.Namespace, scenario: Scenario, crash: str, second: CrashPoint | None, base: Path
) -> int:
    """The cases ``crashmatrix run`` was asked for, their directories under ``base``."""
    from crashmatrix.harness.agents.loading import fork_preload, load_adapter
    from crashmatrix.harness.front.cases import (
        enumerate_points,
        guarded,
        run_double,
        run_point,
        run_power,
        run_recovery,
        run_tool_fault,
    )
    from crashmatrix.harness.lives.first_crash import FirstCrashes
    from crashmatrix.harness.lives.injector import LifeLauncher
    from crashmatrix.harness.lives.power import power_target
    from crashmatrix.harness.plan.enumeration import (
        RECOVERY_FIRST,
        TOOL_SIDE_COLUMNS,
        adapter_double_unreachable,
        adapter_tool_side_unreachable,
        double_points,
        power_points,
        selected,
    )
    from crashmatrix.harness.verdict.explain import SECOND, explain

    kept = args.keep is not None
    recovery_item = crash.startswith(RECOVERY)
    spec = getattr(load_adapter(args.agent), "spec", None)  # adapter_file.ForeignSpec
    cannot_fail = adapter_tool_side_unreachable(args.agent, spec)
    kind = crash.partition("[")[0]
    if kind in cannot_fail:  # asked for by name: refused before any life runs
        raise InputError(f"--crash {crash}: {kind} cannot act on this agent: {cannot_fail[kind]}")
    double_item = crash.startswith(DOUBLE_PREFIX)
    cannot_double = adapter_double_unreachable(args.agent, load_adapter(args.agent))
    if double_item and cannot_double is not None:
        raise InputError(f"--crash {crash}: {cannot_double}")
    launcher = LifeLauncher(args.isolation, preload=fork_preload(args.agent), warm=(args.agent,))
    enum = enumerate_points(scenario, launcher, base / "enumerate", agent=args.agent)
    power = crash.startswith(POWER)
    tool_side = [p for p in enum.tool_side if p.boundary not in cannot_fail]
    chosen: list[CrashPoint | None]
    if crash == CLEAN:
        chosen = [None]
    elif recovery_item or double_item:
        chosen = []  # the one recovery@ or double@ item, below
    elif crash.partition("[")[0] in TOOL_SIDE_COLUMNS:
        chosen = []  # the one tool-side case, below
        tool_side = [_resolve_point(crash, enum.tool_side)]
    elif crash:
        chosen = [_resolve_point(crash.removeprefix(POWER), enum.points)]
    else:
        chosen = [None, *selected(enum.points, scenario)]
    depth_two = not crash and scenario.recovery_crashes and not args.no_recovery_crashes
    recovery_points = (
        [p for p in enum.points if p.boundary in RECOVERY_FIRST and p.occurrence == 1] if depth_two else []
    )
    if recovery_item:  # asked for by name: run even where the plugin would not make the item
        recovery_points = [_resolve_point(crash.removeprefix(RECOVERY), enum.points)]
    # The whole matrix has the power column, as under pytest (where the loss can act).
    power_column = not crash and not args.no_power_loss
    if power_column and isinstance(power_target(args.agent, enum.clean.case_dir), str):
        power_column = False
    power_points_ = power_points([p for p in chosen if p is not None]) if power_column else []
    # The double-resume column too, where two lives on one session can be told apart.
    doubles = (
        double_points([p for p in chosen if p is not None])
        if not crash and not args.no_double_resume and cannot_double is None
        else [_resolve_point(crash.removeprefix(DOUBLE_PREFIX), enum.points)]
        if double_item
        else []
    )
    # P, recovery@P and power@P start with the same first crash: run it once for all, as the
    # pytest plugin does -- but not with --keep, where each kept case directory is whole.
    # (A recovery@ item asked for alone has no P to share with.)
    shared = (
        FirstCrashes(base / "first-crashes", record_syncs=bool(power_points_))
        if (recovery_points or power_points_ or doubles) and chosen and args.keep is None
        else None
    )
    results = []
    for point in chosen:
        name = point.id if point else "clean"
        name = f"power@{name}" if power else name
        name += f" then {second.id}" if second else ""
        print(f"{scenario.path.name}::{name} ...", end=" ", flush=True)
        case_dir = base / name.replace(" ", "_")
        # A harness failure in one case is that case's error (one line, its log file): the
        # rest of the matrix still runs.
        result = guarded(
            functools.partial(
                run_point,
                scenario,
                point,
                launcher,
                case_dir,
                agent=args.agent,
                power_loss=power,
                second=second,
                shared=shared if point in recovery_points or point in power_points_ else None,
            ),
            scenario,
            name.partition(" ")[0],
            "power_loss" if power and point else (point.boundary if point else "clean"),
            case_dir,
            args.agent,
        )
        if second:  # run_point names the case by its first crash; the rerun line needs both
            result = dataclasses.replace(result, extra={**result.extra, SECOND: second.id})
        print(result.verdict.status)
        if power:
            _print_power_loss(result.case_dir)
        results.append(result)
    for point in power_points_:
        name = f"power@{point.id}"
        print(f"{scenario.path.name}::{name} ...", end=" ", flush=True)
        result = guarded(
            functools.partial(
                run_power, scenario, point, launcher, base / name, agent=args.agent, shared=shared
            ),
            scenario,
            name,
            "power_loss",
            base / name,
            args.agent,
        )
        print(result.verdict.status)
        results.append(result)
    # The tool-side cases: the whole matrix's (unless --no-tool-side-faults), or the one named.
    named_tool_side = crash.partition("[")[0] in TOOL_SIDE_COLUMNS
    if (crash and not named_tool_side) or (not crash and args.no_tool_side_faults):
        tool_side = []
    for point in tool_side:
        print(f"{scenario.path.name}::{point.id} ...", end=" ", flush=True)
        result = guarded(
            functools.partial(run_tool_fault, scenario, point, launcher, base / point.id, agent=args.agent),
            scenario,
            point.id,
            point.boundary,
            base / point.id,
            args.agent,
        )
        print(result.verdict.status)
        results.append(result)
    for point in doubles:
        name = f"{DOUBLE_PREFIX}{point.id}"
        print(f"{scenario.path.name}::{name} ...", end=" ", flush=True)
        result = guarded(
            functools.partial(
                run_double, scenario, point, launcher, base / name, agent=args.agent, shared=shared
            ),
            scenario,
            name,
            "double_resume",
            base / name,
            args.agent,
        )
        print(result.verdict.status)
        results.append(result)
    for point in recovery_points:
        name = f"recovery@{point.id}"
        print(f"{scenario.path.name}::{name} ...", end=" ", flush=True)
        result = guarded(
            functools.partial(
                run_recovery, scenario, point, launcher, base / name, agent=args.agent, shared=shared
            ),
            scenario,
            name,
            "recovery",
            base / name,
            args.agent,
        )
        print(result.verdict.status)
        results.append(result)
    unreached = [r for r in results if r.verdict.status == "not_reached"]
    # Not applicable (a fault that could not act on this agent) is no verdict on the agent.
    inapplicable = [r for r in results if r.verdict.status == "not_applicable"]
    failed = [r for r in results if not r.passed and r not in unreached and r not in inapplicable]
    for result in [*failed, *unreached, *inapplicable]:
        print()
        print(explain(result, args.agent, kept=kept))
    # Green, but said: the agent died on a tool-side fault and recovered when restarted.
    for result in results:
        note = died_on_fault_note(result.verdict.notes) if result.passed else None
        if note is not None:
            print(f"\n{result.scenario.path.name}::{result.point_id} passed after dying on the fault: {note}")
    passed = len(results) - len(failed) - len(unreached) - len(inapplicable)
    tail = f", {len(unreached)} not reached" if unreached else ""
    tail += f", {len(inapplicable)} not applicable" if inapplicable else ""
    where = f"case directories under {base}" if kept else "case directories removed (--keep DIR keeps them)"
    print(f"\n{passed} passed, {len(failed)} failed{tail}; {where}")
    return EXIT_FAILED if failed else EXIT_OK


def _print_power_loss(case_dir: Path) -> None:
    """What each power loss of the case did, which outcome it left and how many there were."""
    from crashmatrix.harness.lives.power import FAULT_EVENT
    from crashmatrix.harness.lives.tracer import read_trace

    for event in read_trace(case_dir):
        if event.get("event") == FAULT_EVENT and event.get("fault") == "power_loss":
            print(f"  power loss after life {event.get('life')}: {event.get('detail')}")


def _points(args: argparse.Namespace) -> int:
    from crashmatrix.harness.agents.loading import adapter_for, fork_preload
    from crashmatrix.harness.front.cases import enumerate_points
    from crashmatrix.harness.input.scenario import load_scenario
    from crashmatrix.harness.lives.injector import LifeLauncher
    from crashmatrix.harness.lives.postgres import ensure_servers
    from crashmatrix.harness.plan.enumeration import adapter_tool_side_unreachable

    scenario = load_scenario(args.file)
    ensure_servers(adapter_for(args.agent))  # before the fork server: its lives inherit the server
    launcher = LifeLauncher("fork", preload=fork_preload(args.agent), warm=(args.agent,))
    with tempfile.TemporaryDirectory(prefix="crashmatrix-") as tmp:
        enum = enumerate_points(scenario, launcher, Path(tmp), agent=args.agent)
    for point in enum.points:
        print(point.id)
    # The tool-side cases (the tool side fails one call, the agent lives on), where a fault
    # can act on this agent: each kind for each call that reached its tool side.
    spec = getattr(adapter_for(args.agent), "spec", None)  # adapter_file.ForeignSpec
    cannot_fail = adapter_tool_side_unreachable(args.agent, spec)
    for point in enum.tool_side:
        if point.boundary not in cannot_fail:
            print(point.id)
    # Torn writes and the model's reply alone: the harness makes those points whether or not
    # the agent's boundary rules ever held.
    if all(point.boundary in ("torn_write", "after_model_reply") for point in enum.points):
        # An empty list is not "no crash points to worry about": every case of the matrix
        # would be missing. Exit 1, as run does for a failed case: the files were usable
        # (exit 2 is for input refused before running) and the run's finding is the failure.
        problems = [p.splitlines()[0] for p in enum.clean_verdict.problems if p]
        why = f" (the clean run: {problems[0]})" if problems else ""
        marks = (
            f"{args.agent}'s boundaries: (function:, where:, call_id:) match what the agent calls"
            if args.agent.endswith((".yaml", ".yml"))
            else f"--agent {args.agent} calls ctx.hook at its boundaries"
        )
        print(
            f"crashmatrix: {args.file}: the clean run passed no boundary, so it records no crash "
            f"point at a boundary{why}; check that the scenario's model calls a tool and that {marks}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    from crashmatrix.harness.agents.adapter_file import load_foreign
    from crashmatrix.harness.input.contract_files import load_contract
    from crashmatrix.harness.input.scenario import load_scenario

    bad = 0
    files: list[Path] = []
    for given in args.files:
        # A folder stands for every YAML file under it (``crashmatrix validate scenarios/``).
        if given.is_dir():
            files += sorted(p for p in given.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
        else:
            files.append(given)
    for path in files:
        try:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError as error:
                raise InputError(f"{path}: cannot read it ({error.strerror})") from error
            if _SCENARIO_KEYS.search(text):
                load_scenario(path)
            elif _ADAPTER_KEYS.search(text):
                load_foreign(path)
            else:
                load_contract(path)
            print(f"{path}: ok")
        except CrashmatrixError as error:
            print(error)
            bad += 1
    return EXIT_USAGE if bad else EXIT_OK


def _import_mcp(args: argparse.Namespace) -> int:
    from crashmatrix.harness.input.limits import oversize
    from crashmatrix.harness.input.mcp_import import import_mcp

    sources = (("TOOLS.json", args.tools), ("--server", args.server), ("--url", args.url))
    given = [flag for flag, value in sources if value]
    if len(given) != 1:
        raise InputError(
            "import-mcp: give one of TOOLS.json, --server CMD or --url URL"
            + (f" (got {' and '.join(given)})" if given else "")
        )
    if args.tools is None:
        from crashmatrix.harness.agents.mcp_upstream import live_tools

        source, tools = live_tools(args.server, args.url)
        try:
            imported = import_mcp(tools, trust_annotations=args.trust_annotations, source=source)
        except InputError as error:
            raise InputError(f"{source}: {error}") from error
        return _write_imported(imported, args.out)
    too_large = oversize(args.tools)
    if too_large is not None:
        raise InputError(f"{args.tools}: {too_large}")
    try:
        raw = json.loads(args.tools.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InputError(f"{args.tools}: cannot read a JSON tools list ({error})") from error
    try:
        imported = import_mcp(raw, trust_annotations=args.trust_annotations, source=str(args.tools))
    except InputError as error:
        raise InputError(f"{args.tools}: {error}") from error
    return _write_imported(imported, args.out)


def _write_imported(imported: McpImport, out: Path) -> int:
    from crashmatrix.harness.input.mcp_import import contract_to_yaml

    out.mkdir(parents=True, exist_ok=True)
    for contract in imported.contracts:
        target = out / f"{contract.name}.yaml"
        target.write_text(contract_to_yaml(contract), encoding="utf-8")
        print(f"{target}: {contract.idempotency}/{contract.replay_policy} ({contract.reason})")
    for line in imported.skipped:  # the others are written: exit 1 says the import is partial
        print(f"crashmatrix: {line}", file=sys.stderr)
    return EXIT_FAILED if imported.skipped else EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from crashmatrix.reports.compare import compare_runs, write_comparison
    from crashmatrix.reports.results import load_results
    from crashmatrix.reports.writer import write_report

    out: Path = args.out or Path("reports") / "latest"
    if args.merge:
        if args.results or args.compare:
            raise InputError("report: give --merge SHARD.json... alone, without RESULTS.json or --compare")
        from crashmatrix.reports.merge import load_merged

        matrix = write_report(load_merged(args.merge), out)
        print(f"merged {len(args.merge)} results files: {matrix.headline}")
        print(f"wrote {out / 'matrix.html'}, {out / 'matrix.md'}, {out / 'matrix.json'}")
        import os

        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:  # as one run does: the merged matrix is the CI job's summary, cut to fit
            from crashmatrix.reports.writer import append_step_summary

            append_step_summary(matrix, Path(summary))
        return EXIT_OK
    if args.compare:
        if args.results:
            raise InputError("report: give either RESULTS.json or --compare A.json B.json, not both")
        if len(args.compare) < 2:
            raise InputError("report: --compare needs two results files or more (A.json B.json ...)")
        runs = [load_results(path) for path in args.compare]
        names = [f"{path} (agent {run.agent})" for path, run in zip(args.compare, runs, strict=True)]
        comparison = compare_runs(runs, names)
        md, html = write_comparison(comparison, out)
        print(f"{len(comparison.differing)} cells differ")
        for row, cell in comparison.differing:
            print(f"  {row.label} {cell.column}: {' -> '.join(cell.states)}")
        print(f"{len(comparison.differing_evals)} evals differ")
        for pair in comparison.differing_evals:
            print(f"  {pair.id}: {' -> '.join(pair.states)}")
        print(f"wrote {html} and {md}")
        return EXIT_OK
    if not args.results:
        raise InputError("report: give a results file (RESULTS.json) or --compare A.json B.json")
    results = load_results(args.results)
    target = out / "matrix.json"
    same = target.exists() and target.resolve() == args.results.resolve()
    matrix = write_report(results, out, with_json=not same)
    print(matrix.headline)
    print(f"wrote {out / 'matrix.html'}, {out / 'matrix.md'}" + ("" if same else f", {target}"))
    return EXIT_OK


DELEGATED_HELP = {
    "eval": "run the built-in suite against an agent (--agent ADAPTER) and print its scorecard",
    "mutants": "run the suite against the deliberately broken agents; exit 1 if one survives",
    "explore": "hypothesis generates conversations and crash schedules; writes found failures as YAML",
    "doctor": "plant the faults each check exists for into an agent's own case; show which checks fire",
    "init": "write a commented adapter.yaml by reading a Python agent's code, check it, run a clean case",
    "mcp-serve": "serve a life's tools as an MCP server (the relay an adapter's {mcp_command} starts)",
}


def _delegated(command: str, rest: Sequence[str]) -> int:
    if command == "eval":
        from crashmatrix.harness.front.evaluate import main_eval

        return main_eval(rest)
    if command == "mutants":
        from crashmatrix.harness.front.mutation import main_mutants

        return main_mutants(rest)
    if command == "explore":
        from crashmatrix.harness.front.explore import main_explore

        return main_explore(rest)
    if command == "doctor":
        from crashmatrix.harness.front.doctor import main_doctor

        return main_doctor(rest)
    if command == "init":
        from crashmatrix.harness.front.init import main_init

        return main_init(rest)
    if command == "mcp-serve":
        from crashmatrix.harness.agents.mcp_relay import main as main_relay

        return main_relay(rest)
    raise AssertionError(command)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # Whoever read our output went away (``crashmatrix run ... | head``): nothing more to
        # say, and nothing to say it to. Python would print a traceback flushing stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + signal.SIGPIPE


def _main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    # ``--agent=mypkg.graph:build`` names a team's module from where they run us, as
    # ``python -m pytest`` finds it; a console script's sys.path lacks the current directory
    # (every rerun line a failure prints would need PYTHONPATH=. otherwise). Lives and the fork
    # server inherit sys.path.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    if words[:1] and words[0] in DELEGATED_HELP:
        return _delegated(words[0], words[1:])
    args = _parser().parse_args(words)
    handlers = {
        "run": _run,
        "points": _points,
        "validate": _validate,
        "import-mcp": _import_mcp,
        "report": _report,
        "schema": _schema,
    }
    # SIGTERM (a cancelled CI job, a timeout) ends Python without running ``finally`` or exit
    # handlers: as an interrupt, the run's scratch directory and fork servers go as on Ctrl-C.
    terminate = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    )
    if terminate:
        signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        return handlers[args.command](args)
    except CrashmatrixError as error:
        print(f"crashmatrix: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("crashmatrix: interrupted", file=sys.stderr)
        return 130
    finally:
        if terminate:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _terminate_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    raise SystemExit(main())
