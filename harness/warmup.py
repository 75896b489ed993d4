"""Imported by the fork server (its preload list): run one throwaway life in-process so that
every life forked from it starts warm.

A forked life is always the first life of its process. Importing modules is not enough:
openai builds its request transforms, pydantic its validators, typing its caches, respx its
routes, lazily on first use -- about 100 ms that every life would pay again. One clean life
here pays it once, before any fork; children inherit the warm caches copy-on-write.

The throwaway life runs the reference agent on a two-call scenario in a temporary directory
and leaves nothing behind (no thread, no open file, no process). If it fails, lives are only
slower, never wrong, so the failure is swallowed.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

__all__: list[str] = []

_SCENARIO = """\
name: warmup
tools: [write_file, send_email]
turns: ["warm up"]
model:
  - when: {role: user}
    reply:
      tool_calls:
        - {id: call_w, name: write_file, arguments: {path: w.txt, content: w}}
        - {id: call_e, name: send_email, arguments: {to: w@example.com, subject: w, body: w}}
  - when: {role: tool}
    reply: {content: "warm"}
"""


def _warm() -> None:
    from .injector import prepare_case
    from .life import LifeSpec, Tracer, run_life
    from .scenario import load_scenario

    with tempfile.TemporaryDirectory(prefix="crashmatrix-warmup-") as tmp:
        path = Path(tmp) / "warmup.yaml"
        path.write_text(_SCENARIO, encoding="utf-8")
        scenario = load_scenario(path)
        case_dir = Path(tmp) / "case"
        prepare_case(case_dir, scenario)
        spec = LifeSpec(str(case_dir), scenario, "reference", 1)
        run_life(spec, Tracer(case_dir / "trace.jsonl", 1, None))


with contextlib.suppress(Exception):  # a cold life is slower, not wrong
    _warm()
