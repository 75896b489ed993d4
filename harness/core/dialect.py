"""How one agent words what the suite talks about: its tool names and argument shapes
(``ToolMap``) and the shape of its Tool Results (``ResultMapping``).

The scripted model speaks to an agent in its dialect (hands out calls under its tool names,
reads the category of its results), and the verdict reads the agent's session and requests
through the same dialect. The reference agent's dialect is the suite's own. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crashmatrix.harness.core.categories import AUTO, CRASHMATRIX, ResultMapping
from crashmatrix.harness.core.toolmap import ToolMap

__all__ = ["NATIVE", "Dialect"]


@dataclass(frozen=True, slots=True)
class Dialect:
    results: ResultMapping = AUTO
    tools: ToolMap = field(default_factory=ToolMap.identity)


# The suite's own words: crashmatrix's Tool Results (seed 004's shape) and tool names.
NATIVE = Dialect(CRASHMATRIX, ToolMap.identity())
