"""note-agent: files a note per request, as its own tool, and talks to its model over plain
HTTP. A test agent for effect probes of a black box (kind 3): its tool's effect is a file.

NOTE_AGENT_BUG=twice writes every note twice (a new file each time): the bug the files
probe must turn red.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

SESSION = Path(".notes/session.jsonl")
TWICE = os.environ.get("NOTE_AGENT_BUG") == "twice"
TOOLS = [{"type": "function", "function": {"name": "file_note", "parameters": {"type": "object"}}}]


def append(record: dict[str, Any]) -> None:
    SESSION.parent.mkdir(parents=True, exist_ok=True)
    with open(SESSION, "a", encoding="utf-8") as file:
        file.write(json.dumps(record, separators=(",", ":")) + "\n")
        file.flush()
        os.fsync(file.fileno())


def drop_torn_tail() -> None:
    """A last line without its newline was being written when the agent died: cut it off
    before appending, or the next line is glued to it."""
    if SESSION.exists():
        data = SESSION.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(SESSION, "r+b") as file:
                file.truncate(data.rfind(b"\n") + 1)
                os.fsync(file.fileno())


def entries() -> list[dict[str, Any]]:
    if not SESSION.exists():
        return []
    return [json.loads(line) for line in SESSION.read_text(encoding="utf-8").split("\n")[:-1] if line]


def ask_model() -> dict[str, Any]:
    messages = [e["message"] for e in entries() if e["type"] == "message"]
    body = json.dumps({"model": "m", "messages": messages, "tools": TOOLS}).encode()
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        message: dict[str, Any] = json.loads(response.read())["choices"][0]["message"]
    return message


def file_note(text: str) -> None:
    for _ in range(2 if TWICE else 1):
        path = Path("notes") / f"{uuid.uuid4().hex[:8]}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


def ledger(call_id: str, execution_id: str, status: str) -> None:
    append(
        {"type": "tool_execution", "execution_id": execution_id, "tool_call_id": call_id, "status": status}
    )


def run(call: dict[str, Any]) -> None:
    execution_id = uuid.uuid4().hex[:8]
    ledger(call["id"], execution_id, "approved")
    ledger(call["id"], execution_id, "running")
    file_note(json.loads(call["function"]["arguments"])["text"])
    ledger(call["id"], execution_id, "succeeded")
    append(
        {
            "type": "message",
            "message": {"role": "tool", "tool_call_id": call["id"], "content": '{"ok": true}'},
        }
    )


def loop() -> None:
    while True:
        reply = ask_model()
        append({"type": "message", "message": reply})
        if not reply.get("tool_calls"):
            return
        for call in reply["tool_calls"]:
            run(call)


def recover() -> None:
    done = {e["message"].get("tool_call_id") for e in entries() if e["type"] == "message"}
    for entry in entries():
        for call in (entry.get("message") or {}).get("tool_calls") or ():
            if call["id"] in done:
                continue
            history = [
                e for e in entries() if e["type"] == "tool_execution" and e["tool_call_id"] == call["id"]
            ]
            if history and history[-1]["status"] == "running":
                ledger(call["id"], history[-1]["execution_id"], "unknown")
                result = '{"ok": false, "code": "SIDE_EFFECT_UNCERTAIN"}'
                append(
                    {
                        "type": "message",
                        "message": {"role": "tool", "tool_call_id": call["id"], "content": result},
                    }
                )
            elif history and history[-1]["status"] == "succeeded":
                # Ran, its result lost (a torn Tool Result line): publish it, never run again.
                append(
                    {
                        "type": "message",
                        "message": {"role": "tool", "tool_call_id": call["id"], "content": '{"ok": true}'},
                    }
                )
            else:
                run(call)
    messages = [e["message"] for e in entries() if e["type"] == "message"]
    if messages and (messages[-1]["role"] != "assistant" or messages[-1].get("tool_calls")):
        loop()


def main() -> None:
    drop_torn_tail()
    recover()
    for line in sys.stdin:
        if line.strip():
            append({"type": "message", "message": {"role": "user", "content": line.strip()}})
            loop()
        print("> ", end="", flush=True)


if __name__ == "__main__":
    print("> ", end="", flush=True)
    main()
