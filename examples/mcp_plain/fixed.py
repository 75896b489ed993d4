"""agent.py with its two recovery bugs fixed, the way a careful team would, still a plain `mcp`
client: the same conversation, model and server, plus a small ledger of its own
(``.support_desk/ledger.jsonl``, each line fsynced) and the server's own word on each tool.

* Each call gets a call site, ``<turn>:<call id>`` (the turn counted in the conversation: a
  model may reuse an id such as ``call_0`` in a later turn), and an idempotency key derived
  from it, sent in the request's ``_meta`` (and as the ``idempotency_key`` argument where the
  tool's schema declares one: that is the server saying it deduplicates by key).
* ``running`` is on disk before the request goes out, ``done`` with the result text as soon as
  the answer is in, before the conversation records it.
* What a call that may have acted gets again -- a site left ``running`` by a process that died,
  or a request whose server went away before answering -- follows what the server declared:
  a tool taking a key is called again with the SAME key (the server finds the first attempt
  instead of acting twice); a read-only or idempotent tool (``readOnlyHint`` /
  ``idempotentHint``) is called again; any other tool is never called again, and the model is
  told the truth: it may have happened (``SIDE_EFFECT_UNCERTAIN``).
* A keyed tool that answers it cannot tell whether it acted (its own response was lost) is
  asked again under the same key, and answers what the first attempt did.
* A site already ``done`` is answered with the result it got, which the model never saw.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from agent import SESSION, Agent, ServerGone, main

LEDGER = SESSION.with_name("ledger.jsonl")


def ledger() -> dict[str, dict[str, Any]]:
    """The latest entry of each call site (a torn last line is a write that never finished:
    dropped, as the conversation's)."""
    latest: dict[str, dict[str, Any]] = {}
    if LEDGER.exists():
        for line in LEDGER.read_bytes().split(b"\n"):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            latest[entry["site"]] = entry
    return latest


def record(entry: dict[str, Any]) -> None:
    LEDGER.parent.mkdir(parents=True, exist_ok=True)
    data = LEDGER.read_bytes() if LEDGER.exists() else b""
    if data and not data.endswith(b"\n"):  # a torn last line: the next entry starts clean
        data = data[: data.rfind(b"\n") + 1]
        LEDGER.write_bytes(data)
    new = not data
    with open(LEDGER, "a", encoding="utf-8") as file:
        file.write(json.dumps(entry, separators=(",", ":")) + "\n")
        file.flush()
        os.fsync(file.fileno())
    if new:
        folder = os.open(LEDGER.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def uncertain(name: str, why: str) -> str:
    return json.dumps(
        {
            "ok": False,
            "code": "SIDE_EFFECT_UNCERTAIN",
            "error": f"{name} may or may not have happened ({why}); it was not run again. "
            "Check before asking for it again.",
        }
    )


def said_uncertain(result: str) -> bool:
    """Whether a tool's answer says it cannot tell whether it acted."""
    try:
        data = json.loads(result)
    except ValueError:
        return False
    return isinstance(data, dict) and (
        data.get("code") == "SIDE_EFFECT_UNCERTAIN" or data.get("status") == "unknown"
    )


class FixedAgent(Agent):
    def site(self, call_id: str) -> str:
        turn = sum(1 for message in self.messages if message.get("role") == "user")
        return f"{turn}:{call_id}"

    def keyed(self, name: str) -> bool:
        schema = self.tools.listed.get(name, {}).get("inputSchema") or {}
        return "idempotency_key" in (schema.get("properties") or {})

    def repeatable(self, name: str) -> bool:
        hints = self.tools.listed.get(name, {}).get("annotations") or {}
        return bool(hints.get("readOnlyHint") or hints.get("idempotentHint"))

    async def execute(self, call_id: str, name: str, arguments: dict[str, Any]) -> str:
        site = self.site(call_id)
        key = f"support-desk:{site}"
        seen = ledger().get(site)
        if seen is not None and seen["status"] == "done":
            return str(seen["result"])  # answered before the crash; the model never saw it
        if seen is not None and not (self.keyed(name) or self.repeatable(name)):
            result = uncertain(name, "the agent stopped while it was running")
            record({"site": site, "status": "done", "result": result})
            return result
        if seen is None:
            record({"site": site, "status": "running", "tool": name, "key": key})
        sent = {**arguments, "idempotency_key": key} if self.keyed(name) else arguments
        meta = {"idempotency_key": key, "tool_call_id": call_id}
        try:
            result = await self.tools.call(name, sent, meta=meta)
        except Exception as error:
            # No answer it can read (the server went away, or sent what the client refused):
            # the request reached the server, so the tool may have acted.
            if isinstance(error, ServerGone):
                await self.tools.reopen()
            if self.keyed(name) or self.repeatable(name):
                try:
                    result = await self.tools.call(name, sent, meta=meta)
                except Exception as again:
                    result = uncertain(name, f"no readable answer twice: {type(again).__name__}")
            else:
                result = uncertain(name, f"no readable answer from the tool server: {type(error).__name__}")
        if self.keyed(name) and said_uncertain(result):
            # The server itself lost track (its answer was lost on its side): asked again
            # under the same key, it finds the first attempt instead of acting twice.
            try:
                result = await self.tools.call(name, sent, meta=meta)
            except Exception as error:
                result = uncertain(name, f"no readable answer on asking again: {type(error).__name__}")
        record({"site": site, "status": "done", "result": result})
        return result


if __name__ == "__main__":
    asyncio.run(main(FixedAgent))
