"""The pass-matrix report, rendered from one results file (``matrix.json``).

``results`` (records, JSON I/O, schema) -> ``matrix`` (pure aggregation) -> ``markdown`` /
``html`` / ``terminal`` (renderers); ``compare`` puts two results side by side; ``writer``
writes a report directory; ``collector`` is the pytest side.
"""

from __future__ import annotations

from crashmatrix.reports.compare import Comparison, compare
from crashmatrix.reports.errors import ResultsFileError
from crashmatrix.reports.matrix import COLUMNS, Matrix, build_matrix
from crashmatrix.reports.results import CaseRecord, Results, load_results, write_results
from crashmatrix.reports.writer import write_report

__all__ = [
    "COLUMNS",
    "CaseRecord",
    "Comparison",
    "Matrix",
    "Results",
    "ResultsFileError",
    "build_matrix",
    "compare",
    "load_results",
    "write_report",
    "write_results",
]
