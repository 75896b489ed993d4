"""Every error crashmatrix raises on purpose.

    CrashmatrixError
     +-- InputError (ValueError)           bad input a person can fix; message is one line
     |    +-- YamlError                    a scenario/contract/adapter file: path:line:col: key: problem
     |    +-- SessionCorruption            a session JSONL line that is not a record: path:line (byte N)
     |    +-- SandboxViolation             a hostile path handed to a mock tool
     +-- LedgerError (ValueError)          an illegal ledger transition (a bug in an agent)
     +-- HarnessError (RuntimeError)       the harness itself could not do its job
          +-- DiskFull                     the disk it writes to is full: the directory, what to do

Errors caused by user input also subclass the builtin a user would catch (``ValueError``),
as Hypothesis does, and their message names the file and the fix.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "CrashmatrixError",
    "DiskFull",
    "HarnessError",
    "InputError",
    "LedgerError",
    "SandboxViolation",
    "SessionCorruption",
    "YamlError",
]


class CrashmatrixError(Exception):
    """Root of every error crashmatrix raises deliberately."""


class InputError(CrashmatrixError, ValueError):
    """Input a person wrote or a process left behind is not usable as it is."""


class YamlError(InputError):
    """A YAML file (scenario, contract, adapter) is malformed or does not fit its schema.

    ``str()`` is the one-line ``path:line:col: key: problem`` form that pytest and the CLI print.
    """

    def __init__(self, path: Path | str, line: int, col: int, problem: str, *, key: str = "") -> None:
        self.path = Path(path)
        self.line = line
        self.col = col
        self.key = key
        self.problem = problem
        where = f"{self.path}:{line}:{col}"
        super().__init__(f"{where}: {key}: {problem}" if key else f"{where}: {problem}")


class SessionCorruption(InputError):
    """A complete line of a session file is not a valid record.

    A torn *final* line is not corruption (the writer died mid-append); it is reported by
    the reader as a ``TornTail`` instead.
    """

    def __init__(self, path: Path | str, line: int, byte: int, problem: str) -> None:
        self.path = Path(path)
        self.line = line
        self.byte = byte
        self.problem = problem
        super().__init__(
            f"{self.path}:{line}: (byte {byte}) {problem}; the session is refused from here on "
            "and was not modified: repair or move the file, then run again"
        )


class SandboxViolation(InputError):
    """A path given to a mock tool escapes the workspace or names a forbidden file."""


class LedgerError(CrashmatrixError, ValueError):
    """A ledger transition that the state machine does not allow."""


class HarnessError(CrashmatrixError, RuntimeError):
    """The harness could not run a case (not a verdict on the agent)."""


class DiskFull(HarnessError):
    """The disk the harness writes to (a case directory, its world, a template) is full: one
    line naming the directory and what to do, never a traceback, once the harness removed
    what it had half written there (``removed``)."""

    def __init__(self, where: Path, removed: str = "") -> None:
        self.where = where
        done = f"; the harness removed {removed}" if removed else ""
        super().__init__(
            f"no space left on the disk holding {where}{done}: free space there, or run on another "
            "disk (crashmatrix run --keep DIR, pytest --basetemp DIR, or TMPDIR for scratch)"
        )
