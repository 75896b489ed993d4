"""Whether this process is a fork server (or a life it forked), and which agents it prepares.

Its own module so that what the server imports to prepare itself (``harness.lives.warmup``,
``harness.lives.life``) can ask without importing the server's module, which imports them.
"""

from __future__ import annotations

__all__ = ["in_server", "serving", "warming"]

_serving = False
_warming: tuple[str, ...] = ()


def serving(warm: tuple[str, ...]) -> None:
    """Called by the server once it knows what it prepares, before it imports its preloads."""
    global _serving, _warming
    _serving = True
    _warming = warm


def in_server() -> bool:
    """True in a fork server process and in the children it forks (a preload may prepare
    state that only makes sense there, e.g. ``harness.lives.warmup``)."""
    return _serving


def warming() -> tuple[str, ...]:
    """The agents this fork server prepares (``ForkServer(warm=...)``), known before its
    preloads are imported: ``harness.lives.warmup`` runs a life of each framework agent."""
    return _warming
