"""Errors of the reports package.

    CrashmatrixError (harness.errors)
     +-- InputError (ValueError)
          +-- ResultsFileError             a results file that cannot be read: path: problem

A results file is input a person hands to ``crashmatrix report``, so its error is an
``InputError``: the CLI prints it as one line and exits 2.
"""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.errors import InputError

__all__ = ["ResultsFileError"]


class ResultsFileError(InputError):
    """A results file is missing, not JSON, or does not fit ``results.schema.json``."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")
