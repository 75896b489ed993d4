"""The agent's own effects: what a source shows, what a probe records, and the bounds on when.

These read real files and databases in a temporary workspace and record into a real world;
the end-to-end proof that a doubled effect of a foreign agent turns a case red is in
test_foreign_examples.py (desk, HTTP and state agents) and, for files, below.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from crashmatrix.harness.agents.effects import (
    EFFECT_KIND,
    EXISTING_KIND,
    HARNESS_KIND,
    EffectProbe,
    EffectSpec,
    count_effects,
    harness_wrote,
    scan,
)
from crashmatrix.harness.errors import HarnessError
from crashmatrix.mock_tools.world import World


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World.create(tmp_path / "world", session_path=tmp_path / "world" / "workspace" / "s.jsonl")


def _line(path: Path, record: object, *, newline: bool = True) -> None:
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + ("\n" if newline else ""))


def test_a_jsonl_source_counts_complete_matching_lines_only(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.jsonl"
    _line(outbox, {"kind": "email", "to": "a"})
    _line(outbox, {"kind": "sms", "to": "b"})
    outbox.write_text(outbox.read_text() + "not json\n")
    _line(outbox, {"kind": "email", "to": "c"}, newline=False)  # being written: not yet an effect
    spec = EffectSpec("send_email", "jsonl", "outbox.jsonl", where={"kind": "email"}, counts="emails")
    found = scan(spec, tmp_path)
    assert [f.record["to"] for f in found] == ["a"]
    assert count_effects([spec], tmp_path) == {"emails": 1}


def test_a_repeated_identical_line_is_a_second_effect(tmp_path: Path) -> None:
    # The same email twice is two emails: identity is the line, not only its content.
    for _ in range(2):
        _line(tmp_path / "outbox.jsonl", {"to": "a", "subject": "s"})
    spec = EffectSpec("send_email", "jsonl", "outbox.jsonl", counts="emails")
    assert len({f.identity for f in scan(spec, tmp_path)}) == 2


def test_a_sqlite_source_is_identified_by_the_first_column(tmp_path: Path) -> None:
    spec = EffectSpec("create_order", "sqlite", "orders.db", "SELECT id, k FROM orders", counts="orders")
    assert scan(spec, tmp_path) == []  # no database yet: no effect
    with sqlite3.connect(tmp_path / "orders.db") as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, k TEXT)")
        db.execute("INSERT INTO orders (k) VALUES ('x'), ('x')")
    found = scan(spec, tmp_path)
    assert [f.record["id"] for f in found] == [1, 2] and len({f.identity for f in found}) == 2


def test_a_query_that_fails_on_the_agents_database_names_the_declaration(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "orders.db") as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    spec = EffectSpec(
        "create_order", "sqlite", "orders.db", "SELECT nope FROM orders", where_declared="a.yaml:9:7"
    )
    with pytest.raises(HarnessError, match=r"^a\.yaml:9:7: the effects query on orders\.db failed"):
        scan(spec, tmp_path)


def test_a_file_written_twice_with_the_same_content_is_two_effects(tmp_path: Path) -> None:
    spec = EffectSpec("write_file", "files", "notes/*.md")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("hello")
    first = {f.identity for f in scan(spec, tmp_path)}
    temporary = tmp_path / "notes" / "a.md.tmp"
    temporary.write_text("hello")
    os.replace(temporary, tmp_path / "notes" / "a.md")  # a second atomic write, same bytes
    second = {f.identity for f in scan(spec, tmp_path)}
    assert len(first) == len(second) == 1 and first != second


def test_crashmatrix_s_own_session_copy_is_never_an_effect(tmp_path: Path) -> None:
    (tmp_path / ".agent_state").mkdir()
    (tmp_path / ".agent_state" / "session-case.jsonl").write_text("{}\n")
    (tmp_path / "x.jsonl").write_text("{}\n")
    assert [f.record["path"] for f in scan(EffectSpec("write_file", "files", "*"), tmp_path)] == ["x.jsonl"]


def test_a_probe_records_each_new_effect_once_with_the_bounds_of_its_moment(world: World) -> None:
    workspace = world.workspace
    sizes = iter([100, 250, 400])
    recorded: list[int] = []
    spec = EffectSpec("send_email", "jsonl", "outbox.jsonl", counts="emails", ids={"tool_call_id": "call"})
    probe = EffectProbe(
        [spec], workspace, world, lambda: next(sizes), last_bytes=-1, recorded=recorded.append
    )
    probe.probe("start")  # nothing yet
    _line(workspace / "outbox.jsonl", {"to": "a", "call": "call_1"})
    probe.probe("after_running[call_1]")
    probe.probe("after_side_effect[call_1]")  # seen already: not recorded again
    events = world.events(EFFECT_KIND)
    assert len(events) == 1
    event = events[0]
    # It happened after the probe that saw 100 bytes and before the one that saw 250.
    assert (event.session_bytes, event.detail["seen_at_bytes"]) == (100, 250)
    assert event.tool == "send_email" and event.tool_call_id == "call_1"
    assert event.detail["seen_at"] == "after_running[call_1]"
    assert recorded == [100, 250, 400]


def test_a_new_probe_knows_what_an_earlier_life_recorded(world: World) -> None:
    spec = EffectSpec("send_email", "jsonl", "outbox.jsonl")
    _line(world.workspace / "outbox.jsonl", {"to": "a"})
    EffectProbe([spec], world.workspace, world, lambda: 10).probe("life 1")
    EffectProbe([spec], world.workspace, world, lambda: 20).probe("life 2")
    assert len(world.events(EFFECT_KIND)) == 1


def test_a_case_copied_from_a_shared_first_crash_does_not_count_its_files_again(tmp_path: Path) -> None:
    # pytest shares one first crash between cases and copies it (shutil.copytree): every
    # file gets a new inode. The mail the first life wrote is still one mail; a mail the
    # second life writes after the copy is a second one.
    first = World.create(tmp_path / "first" / "world", session_path=tmp_path / "first" / "s.jsonl")
    spec = EffectSpec("send_email", "files", "outbox/new/*.eml", counts="emails")
    (first.workspace / "outbox" / "new").mkdir(parents=True)
    (first.workspace / "outbox" / "new" / "1.eml").write_text("Subject: report")
    EffectProbe([spec], first.workspace, first, lambda: 10).probe("life 1")
    first.close()
    shutil.copytree(tmp_path / "first", tmp_path / "case", symlinks=True)
    with World(tmp_path / "case" / "world") as case:
        EffectProbe([spec], case.workspace, case, lambda: 10).probe("life 2 starts")
        assert len(case.events(EFFECT_KIND)) == 1
        (case.workspace / "outbox" / "new" / "2.eml").write_text("Subject: report")
        EffectProbe([spec], case.workspace, case, lambda: 20).probe("life 2 sends again")
        paths = [json.loads(e.detail["record"])["path"] for e in case.events(EFFECT_KIND)]
        assert paths == ["outbox/new/1.eml", "outbox/new/2.eml"]


def test_what_the_world_held_before_the_first_life_is_no_effect(world: World) -> None:
    # The scenario seeded a note: the agent did not write it.
    (world.workspace / "notes").mkdir()
    (world.workspace / "notes" / "seeded.txt").write_text("old")
    spec = EffectSpec("write_file", "files", "notes/*.txt")
    EffectProbe([spec], world.workspace, world, lambda: 0).probe("start of life 1", baseline=True)
    (world.workspace / "notes" / "new.txt").write_text("new")
    EffectProbe([spec], world.workspace, world, lambda: 50).probe("after_side_effect[call_1]")
    assert [json.loads(e.detail["record"])["path"] for e in world.events(EFFECT_KIND)] == ["notes/new.txt"]


def test_a_probe_records_the_pid_it_is_given(world: World) -> None:
    # After a life was killed, the harness probes for it: the events are the dead life's.
    _line(world.workspace / "outbox.jsonl", {"to": "a"})
    probe = EffectProbe(
        [EffectSpec("send_email", "jsonl", "outbox.jsonl")], world.workspace, world, lambda: 5
    )
    probe.probe("after life 1 (crashed)", pid=4242)
    assert world.events(EFFECT_KIND)[0].pid == 4242


# ---------------------------------------------------------------------------- end to end

NOTE_AGENT = Path(__file__).parent / "data" / "note_agent"


@pytest.mark.slow
@pytest.mark.parametrize(("bug", "red"), [("", False), ("twice", True)], ids=["correct", "writes_twice"])
def test_a_note_file_written_twice_by_a_black_box_turns_every_case_red(
    tmp_path: Path, bug: str, red: bool
) -> None:
    from crashmatrix.harness.front.cases import enumerate_points, run_point
    from crashmatrix.harness.input.scenario import load_scenario
    from crashmatrix.harness.lives.injector import LifeLauncher

    adapter = tmp_path / "adapter.yaml"
    adapter.write_text(
        (NOTE_AGENT / "adapter.yaml")
        .read_text(encoding="utf-8")
        .replace("{here}/agent.py", str(NOTE_AGENT / "agent.py"))
        .replace("contracts_dir: contracts", f"contracts_dir: {NOTE_AGENT / 'contracts'}")
        + f"env: {{NOTE_AGENT_BUG: '{bug}'}}\n",
        encoding="utf-8",
    )
    scenario = load_scenario(NOTE_AGENT / "scenario.yaml")
    launcher = LifeLauncher("fork", preload=["crashmatrix.mock_tools.toolbox"])
    enum = enumerate_points(scenario, launcher, tmp_path / "clean", agent=str(adapter))
    cases = [enum.clean_case()] + [
        run_point(scenario, p, launcher, tmp_path / p.id, agent=str(adapter)) for p in enum.points
    ]
    # Clean, the model edge (its tools are its own: no tool edges) and its session's torn
    # writes (a supervisor cuts the last line of a JSONL session after a kill).
    assert [c.point_id.split("[")[0] for c in cases].count("torn_write") >= 1
    assert len([c for c in cases if not c.point_id.startswith("torn_write")]) == 2
    for case in cases:
        broken = [v.invariant for v in case.verdict.violations]
        assert broken == (["non_idempotent_at_most_once"] if red else []), case.point_id
        # The notes are the agent's own files, seen by the probes as effects of file_note.
        assert case.verdict.observed is not None
        notes = [path for path in case.verdict.observed.world["files"] if path.startswith("notes/")]
        assert len(notes) == (2 if red else 1)


# ---------------------------------------------------------------------------- deletions, renames


def _changes(world: World) -> list[tuple[str, str, str]]:
    """(kind, change, path) of every probe event, in order."""
    out = []
    for event in world.events():
        if event.kind in (EFFECT_KIND, EXISTING_KIND, HARNESS_KIND):
            record = json.loads(event.detail["record"]) if "record" in event.detail else {}
            path = record.get("path") or event.detail["identity"].partition("|")[0].rsplit(":", 2)[0]
            out.append((event.kind, event.detail.get("change", "added"), path))
    return out


def test_a_file_the_probe_saw_that_is_gone_is_a_deletion_effect(world: World) -> None:
    # rm -rf dist: the probe saw dist/app.js (seeded) and it is gone: that is the effect.
    (world.workspace / "dist").mkdir()
    (world.workspace / "dist" / "app.js").write_text("bundle")
    spec = EffectSpec("run_command", "files", "dist/*")
    probe = EffectProbe([spec], world.workspace, world, lambda: 10)
    probe.probe("start of life 1", baseline=True)
    shutil.rmtree(world.workspace / "dist")
    probe.probe("after_side_effect[call_rm]")
    probe.probe("before_tool_result[call_rm]")  # gone already: not a second deletion
    assert _changes(world) == [
        (EXISTING_KIND, "added", "dist/app.js"),
        (EFFECT_KIND, "deleted", "dist/app.js"),
    ]
    deleted = world.events(EFFECT_KIND)[0]
    assert deleted.tool == "run_command" and deleted.detail["seen_at"] == "after_side_effect[call_rm]"


def test_files_gone_by_one_probe_are_one_run_of_deletions(world: World) -> None:
    # rm -rf dist of two files: two events (the timeline names each file) and one run, so
    # non_idempotent_at_most_once counts one effect (``part_of``, as a command's steps).
    (world.workspace / "dist").mkdir()
    for name in ("a.js", "b.js"):
        (world.workspace / "dist" / name).write_text(name)
    spec = EffectSpec("run_command", "files", "dist/*")
    probe = EffectProbe([spec], world.workspace, world, lambda: 10)
    probe.probe("start of life 1", baseline=True)
    shutil.rmtree(world.workspace / "dist")
    probe.probe("after_side_effect[call_rm]")
    first, second = world.events(EFFECT_KIND)
    assert "part_of" not in first.detail and second.detail["part_of"] == first.seq


def test_a_file_moved_is_one_rename_effect_not_a_write_and_a_deletion(world: World) -> None:
    spec = EffectSpec("write_file", "files", "*.txt")
    (world.workspace / "draft.txt").write_text("text")
    probe = EffectProbe([spec], world.workspace, world, lambda: 10)
    probe.probe("start of life 1", baseline=True)
    os.rename(world.workspace / "draft.txt", world.workspace / "final.txt")
    probe.probe("after_side_effect[call_mv]")
    assert _changes(world)[1:] == [(EFFECT_KIND, "renamed", "final.txt")]
    assert json.loads(world.events(EFFECT_KIND)[0].detail["record"])["from"] == "draft.txt"
    # Moved out of what the probe watches: gone, as a deletion.
    os.rename(world.workspace / "final.txt", world.workspace / "final.bak")
    probe.probe("after_side_effect[call_mv2]")
    assert _changes(world)[-1] == (EFFECT_KIND, "deleted", "final.txt")


def test_a_file_rewritten_is_one_write_not_a_deletion(world: World) -> None:
    spec = EffectSpec("write_file", "files", "*.txt")
    probe = EffectProbe([spec], world.workspace, world, lambda: 10)
    (world.workspace / "notes.txt").write_text("one")
    probe.probe("after_side_effect[call_1]")
    (world.workspace / "notes.txt").write_text("two, longer")
    probe.probe("after_side_effect[call_2]")
    assert _changes(world) == [(EFFECT_KIND, "added", "notes.txt")] * 2


def test_a_line_or_row_that_goes_is_no_effect_of_the_agent(world: World) -> None:
    # A relay consumed the outbox, a torn tail was cut: the agent's business, not an effect.
    spec = EffectSpec("send_email", "jsonl", "outbox.jsonl")
    _line(world.workspace / "outbox.jsonl", {"to": "a"})
    probe = EffectProbe([spec], world.workspace, world, lambda: 10)
    probe.probe("after_side_effect[call_1]")
    (world.workspace / "outbox.jsonl").write_text("")
    probe.probe("after_tool_result[call_1]")
    assert [(kind, change) for kind, change, _ in _changes(world)] == [(EFFECT_KIND, "added")]


def test_a_copied_case_sees_a_deletion_of_a_file_recorded_before_the_copy(tmp_path: Path) -> None:
    first = World.create(tmp_path / "first" / "world", session_path=tmp_path / "first" / "s.jsonl")
    spec = EffectSpec("run_command", "files", "dist/*")
    (first.workspace / "dist").mkdir()
    (first.workspace / "dist" / "app.js").write_text("bundle")
    EffectProbe([spec], first.workspace, first, lambda: 10).probe("start of life 1", baseline=True)
    first.close()
    shutil.copytree(tmp_path / "first", tmp_path / "case", symlinks=True)
    with World(tmp_path / "case" / "world") as case:
        probe = EffectProbe([spec], case.workspace, case, lambda: 10)
        probe.probe("start of life 2")  # the same file, a new inode: nothing changed
        assert case.events(EFFECT_KIND) == []
        (case.workspace / "dist" / "app.js").unlink()
        probe.probe("after_side_effect[call_rm]")
        assert [e.detail["change"] for e in case.events(EFFECT_KIND)] == ["deleted"]


# ---------------------------------------------------------------------------- the harness's own writes


def test_a_colleagues_edit_between_lives_is_the_harnesss_never_the_agents(world: World) -> None:
    spec = EffectSpec("write_file", "files", "*.txt")
    (world.workspace / "notes.txt").write_text("draft\n")
    EffectProbe([spec], world.workspace, world, lambda: 0).probe("start of life 1", baseline=True)
    world.external_write("notes.txt", "edited by a colleague\n")
    harness_wrote([spec], world.workspace, world, lambda: 300, "external_write")
    # The next life's first probe diffs against what the harness left: nothing is new.
    EffectProbe([spec], world.workspace, world, lambda: 300).probe("start of life 2")
    assert world.events(EFFECT_KIND) == []
    edit = [e for e in world.events(HARNESS_KIND) if e.detail["change"] == "added"]
    assert len(edit) == 1 and edit[0].detail["by"] == "external_write"
    assert edit[0].session_bytes == 300 and "erases" not in edit[0].detail
    # The agent's own write after it is its effect, as ever.
    (world.workspace / "notes.txt").write_text("final\n")
    EffectProbe([spec], world.workspace, world, lambda: 400).probe("after_side_effect[call_notes]")
    assert len(world.events(EFFECT_KIND)) == 1


def test_what_a_power_loss_took_back_is_erased_and_a_later_same_line_is_a_new_effect(world: World) -> None:
    spec = EffectSpec("send_email", "jsonl", "outbox.jsonl", counts="emails")
    outbox = world.workspace / "outbox.jsonl"
    _line(outbox, {"to": "a"})
    EffectProbe([spec], world.workspace, world, lambda: 100).probe("after_side_effect[call_1]")
    [sent] = world.events(EFFECT_KIND)
    outbox.write_text("")  # the power loss: the line was never synced
    harness_wrote([spec], world.workspace, world, lambda: 80, "power_loss", erases=True)
    [gone] = world.events(HARNESS_KIND)
    assert (gone.detail["change"], gone.detail["erases"], gone.detail["by"]) == (
        "removed",
        sent.seq,
        "power_loss",
    )
    # The agent, restarted, sends it again: the same bytes at the same line are a new effect.
    _line(outbox, {"to": "a"})
    EffectProbe([spec], world.workspace, world, lambda: 200).probe("after_side_effect[call_1]")
    assert len(world.events(EFFECT_KIND)) == 2


def test_a_harness_write_that_replaces_an_agents_file_erases_it_only_for_a_power_loss(world: World) -> None:
    spec = EffectSpec("write_file", "files", "*.txt")
    (world.workspace / "notes.txt").write_text("final\n")
    EffectProbe([spec], world.workspace, world, lambda: 100).probe("after_side_effect[call_notes]")
    world.external_write("notes.txt", "edited by a colleague\n")
    harness_wrote([spec], world.workspace, world, lambda: 100, "external_write")
    removed = [e for e in world.events(HARNESS_KIND) if e.detail["change"] == "removed"]
    # Overwritten by a colleague, the agent's write still happened: not erased.
    assert len(removed) == 1 and "erases" not in removed[0].detail


def test_a_torn_line_of_a_session_that_is_also_an_effect_source_is_erased_by_the_tear(
    tmp_path: Path,
) -> None:
    # The agent's journal is both its session and where its mails show (effects: on it). A
    # torn_write cut of the mail's line is the harness's write: the line was never finished,
    # so the mail it recorded is erased, not counted beside the one the agent writes again.
    from crashmatrix.harness.agents.foreign import load_foreign_adapter
    from crashmatrix.harness.core.trace import LifeRecord
    from crashmatrix.harness.input.scenario import load_scenario
    from crashmatrix.harness.lives.casedir import fresh_case

    root = Path(__file__).resolve().parents[3]
    adapter_file = tmp_path / "adapter.yaml"
    adapter_file.write_text(
        f"""name: journal-effects
python: {{script: {root / "tests" / "golden" / "harness_writes" / "agent.py"}}}
tools: agent
catalogue: {{send_email: {{}}}}
session: {{path: .journal.jsonl}}
effects:
  - tool: send_email
    jsonl: .journal.jsonl
    where: {{status: succeeded, tool_name: send_email}}
    ids: {{tool_call_id: tool_call_id}}
""",
        encoding="utf-8",
    )
    adapter = load_foreign_adapter(adapter_file)
    case = tmp_path / "case"
    fresh_case(case, load_scenario(root / "scenarios" / "send_email" / "send_once.yaml"))
    journal = adapter.raw_session(case)
    for status in ("running", "succeeded"):
        _line(
            journal,
            {
                "type": "tool_execution",
                "tool_call_id": "call_mail",
                "tool_name": "send_email",
                "execution_id": "e1",
                "status": status,
            },
        )
    with World(case / "world") as world:
        EffectProbe(adapter.spec.effects, adapter.workspace(case), world, lambda: 0).probe("fsync")
    killed = LifeRecord(1, "torn_write[call_mail:succeeded]", "crashed", -9, 0.1)
    adapter.after_life(case, killed, [])
    assert not journal.read_bytes().endswith(b"\n")  # torn
    with World(case / "world") as world:
        [mail] = world.events(EFFECT_KIND)
        [took] = world.events(HARNESS_KIND)
    assert (took.detail["by"], took.detail["change"], took.detail["erases"]) == (
        "torn_write",
        "removed",
        mail.seq,
    )


def test_a_files_glob_reads_as_pathlib_reads_it_and_exclude_leaves_paths_out(tmp_path: Path) -> None:
    for relative in ("a.eml", "outbox/new/1.eml", "outbox/tmp/1.eml", "outbox/cur/old/2.eml"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("Subject: report")

    def paths(pattern: str, exclude: tuple[str, ...] = ()) -> list[str]:
        spec = EffectSpec("send_email", "files", pattern, exclude=exclude)
        return [f.record["path"] for f in scan(spec, tmp_path)]

    assert paths("*.eml") == ["a.eml"]  # * stays in its segment (fnmatch let it cross /)
    assert paths("outbox/**/*.eml") == ["outbox/cur/old/2.eml", "outbox/new/1.eml", "outbox/tmp/1.eml"]
    assert paths("outbox/**/*.eml", ("outbox/tmp/**",)) == ["outbox/cur/old/2.eml", "outbox/new/1.eml"]


def test_exclude_belongs_to_a_files_effect_only(tmp_path: Path) -> None:
    from crashmatrix.harness.agents.adapter_file import load_foreign
    from crashmatrix.harness.errors import InputError

    path = tmp_path / "adapter.yaml"
    path.write_text(
        "name: a\ncommand: [agent]\ntools: agent\neffects:\n"
        "  - {tool: send_email, jsonl: outbox.jsonl, exclude: [x]}\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match=r"adapter\.yaml:5:45: effects\[0\]\.exclude: exclude: leaves paths"):
        load_foreign(path)
