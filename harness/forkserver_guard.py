"""Imported only by the forkserver (it is in its preload list): the forkserver dies with the
harness process that started it. See ``harness.parent_death``."""

from __future__ import annotations

from .parent_death import die_with_parent

__all__: list[str] = []

die_with_parent()
