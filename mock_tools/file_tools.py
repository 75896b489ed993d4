"""``read_file``, ``list_files`` and ``write_file``, and ``write_file``'s recovery check.

``write_file`` is seed 004's conditional tool: before the write the runtime records a plan
(``base_sha256`` of the current content, ``after_sha256`` of the new one); after a crash
``check_write`` compares the file now against both (``canReplayFileWrite``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from crashmatrix.harness.core.tools import PreconditionVerdict, ToolObservation
from crashmatrix.harness.errors import SandboxViolation
from crashmatrix.mock_tools.calls import Call, refused, tool_error
from crashmatrix.mock_tools.fileops import atomic_write, sha256_bytes, sha256_of_file, sha256_text
from crashmatrix.mock_tools.sandbox import is_within
from crashmatrix.mock_tools.world import World

__all__ = ["check_write", "list_files", "plan_write", "read_file", "write_file"]


def read_file(call: Call) -> ToolObservation:
    path = call.arguments["path"]
    try:
        target = call.world.resolve(path)
    except SandboxViolation as error:
        return refused(error)
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        return ToolObservation(ok=False, code="NOT_FOUND", content=f"read_file: {path!r} does not exist")
    except IsADirectoryError:
        return tool_error(f"read_file: {path!r} is a directory; use list_files")
    except OSError as error:
        return tool_error(f"read_file: cannot read {path!r}: {error.strerror}")
    return ToolObservation(
        ok=True,
        data={"path": path, "content": data.decode("utf-8", errors="replace"), "truncated": False},
    )


def list_files(call: Call) -> ToolObservation:
    path = call.arguments.get("path") or "."
    try:
        target = call.world.resolve(path)
    except SandboxViolation as error:
        return refused(error)
    if not target.exists():
        return ToolObservation(ok=False, code="NOT_FOUND", content=f"list_files: {path!r} does not exist")
    if not target.is_dir():
        return tool_error(f"list_files: {path!r} is not a directory")
    forbidden = [f.resolve() for f in call.world.forbidden]
    names: list[str] = []
    directories: list[str] = []
    for entry in sorted(os.scandir(target), key=lambda e: e.name):
        # The agent's own state is not part of the world it works on: do not show it.
        if any(is_within(target.joinpath(entry.name).absolute(), f) for f in forbidden):
            continue
        names.append(entry.name)
        if entry.is_dir(follow_symlinks=False):
            directories.append(entry.name)
    return ToolObservation(ok=True, data={"path": path, "names": names, "directories": directories})


def write_file(call: Call) -> ToolObservation:
    path = call.arguments[call.contract.path_argument]
    content = call.arguments[call.contract.content_argument]
    try:
        target = call.world.resolve(path)
    except SandboxViolation as error:
        return refused(error)
    if target.is_dir():
        return tool_error(f"write_file: {path!r} is a directory")
    data = content.encode("utf-8")
    try:
        before = sha256_of_file(target)
        atomic_write(target, data, step=call.ctx.step)  # two steps: temp synced, renamed
    except OSError as error:
        return tool_error(f"write_file: cannot write {path!r}: {error.strerror}")
    # The file is replaced first and the event recorded after: a file cannot join a SQLite
    # transaction, and an effect without an event is still visible in the snapshot hashes.
    call.world.log_event(
        "file_write",
        call.name,
        **call.event_ids(),
        detail={"path": path, "base_sha256": before, "after_sha256": sha256_bytes(data)},
    )
    return ToolObservation(ok=True, data={"path": path, "bytes_written": len(data)})


def plan_write(world: World, path: str, content: str) -> dict[str, Any]:
    """Seed 004's FileWritePlan, computed BEFORE the write (the runtime stores it)."""
    plan: dict[str, Any] = {"path": path, "base_sha256": None, "after_sha256": sha256_text(content)}
    try:
        plan["base_sha256"] = sha256_of_file(world.resolve(path))
    except SandboxViolation as error:
        plan["refused"] = str(error)
    except OSError as error:  # e.g. the path is a directory: the write will fail too
        plan["refused"] = f"cannot read {path!r}: {error.strerror}"
    return plan


def check_write(
    world: World, plan: Mapping[str, Any], *, path: str | None = None, content: str | None = None
) -> PreconditionVerdict:
    """``canReplayFileWrite``: already_applied, apply_again (the file is still at base), conflict.

    ``path``/``content`` are the call's arguments, used only when NO plan was recorded at all
    (seed 000's ledger has none): then the base is unknown and the write falls back to seed
    000's natural idempotency of a full replace with the same arguments.
    """
    if not plan and isinstance(path, str) and isinstance(content, str):
        try:
            current = sha256_of_file(world.resolve(path))
        except SandboxViolation as error:
            return PreconditionVerdict("conflict", None, reason=str(error))
        except OSError as error:
            return PreconditionVerdict("conflict", None, reason=f"cannot read {path!r}: {error.strerror}")
        if current == sha256_text(content):
            return PreconditionVerdict("already_applied", current)
        return PreconditionVerdict(
            "apply_again",
            current,
            reason=(
                "no write plan was recorded, so a change by someone else cannot be detected; "
                "a full replace with the same arguments is naturally idempotent (seed 000)"
            ),
        )
    path = plan.get("path")
    if not isinstance(path, str) or "after_sha256" not in plan or "base_sha256" not in plan:
        return PreconditionVerdict(
            "conflict", None, reason=f"the recorded plan is incomplete: {dict(plan)!r}"
        )
    try:
        current = sha256_of_file(world.resolve(path))
    except SandboxViolation as error:
        return PreconditionVerdict("conflict", None, reason=str(error))
    except OSError as error:
        return PreconditionVerdict("conflict", None, reason=f"cannot read {path!r}: {error.strerror}")
    # Order matters: when base == after (the write changes nothing) the answer is
    # already_applied, which needs no second write.
    if current == plan["after_sha256"]:
        return PreconditionVerdict("already_applied", current)
    if current == plan["base_sha256"]:
        return PreconditionVerdict("apply_again", current)
    now = "is absent" if current is None else f"has sha256 {current}"
    base = "absent" if plan["base_sha256"] is None else plan["base_sha256"]
    return PreconditionVerdict(
        "conflict",
        current,
        reason=(
            f"{path!r} was changed by the user or another tool: it {now}, which is neither the "
            f"planned result {plan['after_sha256']} nor the base it was planned on ({base})"
        ),
    )
