"""crashmatrix's way into the team's Temporal agent (support_agent.py, and fixed.py, unchanged):
the team's worker, built on the client and task queue of the case's own server. ``adapter.yaml``
names ``crashmatrix_factory:build``, ``adapter_fixed.yaml`` ``crashmatrix_factory:build_fixed``."""


def build(ctx):  # type: ignore[no-untyped-def]
    import support_agent

    return support_agent.worker(ctx.client, ctx.task_queue)


def build_fixed(ctx):  # type: ignore[no-untyped-def]
    import fixed

    return fixed.worker(ctx.client, ctx.task_queue)
