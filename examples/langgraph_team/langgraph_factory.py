"""crashmatrix's way into the team's agent (support_graph.py and fixed.py, unchanged): each
graph compiled with the checkpointer crashmatrix hands it (the case's own store)."""

import fixed
import support_graph


def build(ctx):  # type: ignore[no-untyped-def]
    return support_graph.build_graph(ctx.checkpointer)


def build_fixed(ctx):  # type: ignore[no-untyped-def]
    return fixed.build_graph(ctx.checkpointer)
