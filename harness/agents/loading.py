"""Loading an agent adapter from ``--agent``: ``reference``, ``module:factory`` or an adapter YAML."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crashmatrix.harness.errors import InputError

if TYPE_CHECKING:
    from crashmatrix.harness.core.session_log import SessionLog
from crashmatrix.harness.agents.protocol import AgentAdapter

__all__ = ["load_adapter", "read_agent_session"]
BUILTIN = {"reference": "crashmatrix.harness.agents.reference:ReferenceAdapter"}


def read_agent_session(adapter: object, case_dir: Path) -> SessionLog:
    """The session a case left, as the judge should observe it, whatever the agent's format."""
    reader = getattr(adapter, "read_session", None)
    if callable(reader):
        log: SessionLog = reader(case_dir)
        return log
    from crashmatrix.harness.lives.casedir import session_path_of
    from crashmatrix.harness.session_file import read_session

    return read_session(session_path_of(case_dir))


def load_adapter(spec: str, **options: Any) -> AgentAdapter:
    """``reference``, ``package.module:factory`` returning an adapter, or an adapter YAML."""
    if spec.endswith((".yaml", ".yml")):
        from crashmatrix.harness.agents.foreign import load_foreign_adapter

        if options:
            raise InputError(f"--agent={spec!r}: an adapter YAML takes no options; write them in the file")
        return load_foreign_adapter(spec)
    target = BUILTIN.get(spec, spec)
    module_name, sep, attr = target.partition(":")
    if not sep or not attr:
        raise InputError(
            f"--agent={spec!r}: write 'reference' or 'package.module:factory' for a Python adapter"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise InputError(f"--agent={spec!r}: cannot import {module_name!r} ({error})") from error
    factory = getattr(module, attr, None)
    if factory is None:
        raise InputError(f"--agent={spec!r}: {module_name} has no attribute {attr!r}")
    adapter: AgentAdapter = factory(**options)
    return adapter
