"""order-desk's per-process state: what one process opened, once (a client, a lock).

A second start in the same process would find it open already: a Python agent started once
per message must be a fresh start of its modules, as a new process is."""

from __future__ import annotations

OPENED: list[str] = []


def open_once(who: str) -> None:
    if OPENED:
        raise SystemExit(f"order-desk: this process was started already (by {OPENED[0]!r})")
    OPENED.append(who)
