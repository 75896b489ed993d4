"""Lives: the agent's processes. A case directory is prepared, lives are forked from a warm
server (or spawned), each may die by SIGKILL at its planned point, faults are applied
between lives, a power loss drops unsynced bytes, and the case ends when a life exits. The
stage's output is a ``CaseRun`` (``harness.core.trace``): the directory, the lives and the
trace."""
