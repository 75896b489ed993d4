"""Confine a path an agent hands to a mock tool to the case's workspace.

Every refusal is a ``SandboxViolation`` whose one-line message names the path and why; the
tools turn it into ``PERMISSION_DENIED`` with no effect. Checks, in order: type, empty,
NUL byte, encodability, length limits (255 bytes per component, 4096 in total, as Linux),
absolute path, ``..`` component, symlink loops, symlinks leaving the workspace, forbidden
paths (the agent's own session/ledger and ``.agent_state/``), hard links to a forbidden
file, and special files (devices, FIFOs, sockets).

This is a guard against an agent's mistakes and a fuzzer's paths, not against a concurrent
attacker: a symlink swapped in between the check and the use is out of scope (TOCTOU).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from crashmatrix.harness.errors import SandboxViolation

__all__ = ["MAX_COMPONENT_BYTES", "MAX_PATH_BYTES", "is_within", "resolve_in_workspace"]

MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 4096


def is_within(path: Path, root: Path) -> bool:
    """``path`` is ``root`` or below it (both already resolved)."""
    return path == root or root in path.parents


def _refuse(relative: object, why: str) -> SandboxViolation:
    shown = repr(relative)
    if len(shown) > 120:
        shown = shown[:117] + "..."
    return SandboxViolation(f"path {shown} refused: {why}")


def _resolve(path: Path, relative: str) -> Path:
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError) as error:  # RuntimeError: symlink loop on Python 3.11/3.12
        raise _refuse(relative, f"cannot be resolved ({error})") from error


def resolve_in_workspace(workspace: Path, relative: str, *, forbidden: Sequence[Path] = ()) -> Path:
    """The resolved absolute path ``relative`` names inside ``workspace``, or SandboxViolation."""
    if not isinstance(relative, str):
        raise _refuse(relative, f"a path must be a string, not {type(relative).__name__}")
    if relative == "":
        raise _refuse(relative, "the path is empty")
    if "\x00" in relative:
        raise _refuse(relative, "it contains a NUL byte")
    try:
        encoded = os.fsencode(relative)
    except UnicodeEncodeError as error:
        raise _refuse(relative, "it cannot be encoded as a file name") from error
    if len(encoded) > MAX_PATH_BYTES:
        raise _refuse(relative, f"it is {len(encoded)} bytes long (limit {MAX_PATH_BYTES})")
    pure = PurePosixPath(relative)
    if pure.is_absolute():
        raise _refuse(relative, "absolute paths are not allowed; give a path relative to the workspace")
    for part in pure.parts:
        if part == "..":
            # Refused even when it would stay inside: with symlinks, '..' lexically and
            # '..' physically differ, and a sandbox that has to reason about that is fragile.
            raise _refuse(relative, "'..' components are not allowed")
        if len(os.fsencode(part)) > MAX_COMPONENT_BYTES:
            raise _refuse(relative, f"a component is longer than {MAX_COMPONENT_BYTES} bytes")

    root = _resolve(Path(workspace), relative)
    # Walk component by component so the message can name the symlink that leaves.
    current = root
    for part in pure.parts:
        if part == ".":
            continue
        candidate = current / part
        if candidate.is_symlink():
            target = _resolve(candidate, relative)
            if not is_within(target, root):
                raise _refuse(relative, f"{part!r} is a symlink pointing outside the workspace")
            current = target
        else:
            current = candidate
    final = _resolve(root / pure, relative)

    for guarded in forbidden:
        guarded_resolved = _resolve(Path(guarded), relative)
        if is_within(final, guarded_resolved):
            raise _refuse(
                relative, "it names the agent's own session/ledger state, which tools may not touch"
            )
        # A hard link is another name for the same inode: writing through it is writing the
        # session file.
        try:
            if final.exists() and guarded_resolved.is_file() and os.path.samefile(final, guarded_resolved):
                raise _refuse(relative, "it is a hard link to the agent's session file")
        except OSError:
            pass

    try:
        mode = os.stat(final).st_mode
    except FileNotFoundError:
        return final
    except OSError as error:
        raise _refuse(relative, f"cannot be inspected ({error.strerror})") from error
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise _refuse(relative, "it is a device, FIFO or socket, not a regular file")
    return final
