"""crashmatrix's way into the team's DBOS agent (support_agent.py, and fixed.py, unchanged): DBOS
configured as its ``main`` does, on the case's own system database, and the workflow that runs
one turn. ``adapter.yaml`` names ``crashmatrix_factory:build``, ``adapter_fixed.yaml``
``crashmatrix_factory:build_fixed``."""

from dbos import DBOS


def build(ctx):  # type: ignore[no-untyped-def]
    import support_agent

    DBOS(config={"name": "support-agent", "system_database_url": ctx.system_database_url})
    return support_agent.support_turn


def build_fixed(ctx):  # type: ignore[no-untyped-def]
    import fixed

    DBOS(config={"name": "support-agent", "system_database_url": ctx.system_database_url})
    return fixed.support_turn
