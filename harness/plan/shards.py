"""Shards: one run split across N machines by the CI's own job matrix (``--shard=I/N``).

The unit is a file: every item of one scenario lands in the same shard, so its clean case,
its points and its ``recovery@`` items run together (they share first crashes, and a
scenario's row of the matrix comes whole from one shard). The split is a pure function of
the files and their weights, so N jobs that collect the same items agree on it without
talking to each other.

Weights are seconds when a previous run's results file gives them (``--shard-durations``),
else the number of items. Files are placed heaviest first, each on the lightest shard so
far (LPT: within 4/3 of the best split, and good when there are many more files than
shards); ties go by name, then to the lower shard, so the plan never depends on the order
pytest happened to collect in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Shard", "parse_shard", "seconds_by_file", "split", "weights"]

_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` of ``count``, 1-based as CI matrices count (``--shard=1/4`` .. ``4/4``)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``"2/4"`` -> ``Shard(2, 4)``; anything else is a ``ValueError`` saying what to write."""
    match = _SPEC.fullmatch(text)
    if match is None:
        raise ValueError(f"--shard={text}: write I/N, e.g. --shard=1/4 (shard I of N, 1 <= I <= N)")
    index, count = int(match[1]), int(match[2])
    if count < 1 or not 1 <= index <= count:
        example = f"--shard=1/{max(count, 2)}"
        raise ValueError(f"--shard={text}: I must be between 1 and N (N >= 1), e.g. {example}")
    return Shard(index, count)


def seconds_by_file(cases: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Recorded seconds per file, from ``(node id, seconds)`` pairs (a results file's cases)."""
    total: dict[str, float] = {}
    for node_id, seconds in cases:
        path = node_id.partition("::")[0]
        total[path] = total.get(path, 0.0) + max(0.0, seconds)
    return total


def weights(items: Mapping[str, int], recorded: Mapping[str, float] | None = None) -> dict[str, float]:
    """Each file's weight: its recorded seconds, or, for a file the record does not know (a
    new scenario), its items times the recorded seconds per item of the files it does know.
    Without a record (or one that knows none of them), the item count."""
    known = {path: recorded[path] for path in items if recorded and path in recorded}
    known_items = sum(items[path] for path in known)
    if not known or known_items == 0 or sum(known.values()) <= 0:
        return {path: float(count) for path, count in items.items()}
    per_item = sum(known.values()) / known_items
    return {path: known.get(path, count * per_item) for path, count in items.items()}


def split(weight: Mapping[str, float], count: int) -> tuple[tuple[str, ...], ...]:
    """The files of each shard (``count`` tuples, shard 1 first), balanced by weight."""
    if count < 1:
        raise ValueError(f"a split needs at least one shard, not {count}")
    loads = [0.0] * count
    shards: list[list[str]] = [[] for _ in range(count)]
    for path in sorted(weight, key=lambda p: (-weight[p], p)):
        lightest = min(range(count), key=lambda i: (loads[i], i))
        shards[lightest].append(path)
        loads[lightest] += weight[path]
    return tuple(tuple(sorted(files)) for files in shards)
