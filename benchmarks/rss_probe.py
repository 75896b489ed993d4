"""A pytest plugin for ``benchmarks/matrix.py --pytest``: each process of the run (the xdist
controller, each worker) appends its role, its RSS once its items are collected and its peak
RSS at the end to the file ``CRASHMATRIX_RSS_LOG`` names. Loaded with ``-p rss_probe`` (its
folder on ``PYTHONPATH``); prints nothing, asserts nothing."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

_LOG = "CRASHMATRIX_RSS_LOG"
_collected: dict[str, int] = {}


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pytest_collection_finish(session: pytest.Session) -> None:
    _collected["rss"] = _rss_kib()


def pytest_unconfigure(config: pytest.Config) -> None:
    log = os.environ.get(_LOG)
    if not log:
        return
    role = "worker" if hasattr(config, "workerinput") else "controller"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"{role} {os.getpid()} {_collected.get('rss', 0)} {_rss_kib()} {peak}\n")
