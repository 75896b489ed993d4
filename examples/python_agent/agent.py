"""notes-agent: a small coding agent that writes files for its user.

It knows nothing about crashmatrix. It uses the openai package with its own default HTTP
client (OPENAI_BASE_URL / OPENAI_API_KEY from the environment), keeps its session as one JSONL
file in seed 000's format (messages and a tool-execution ledger), runs its one tool,
write_file, itself, and asks before each execution on stdin.

Run it by hand: OPENAI_BASE_URL=... python agent.py   (type a request at the "> " prompt)
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

from openai import OpenAI

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Replace the whole content of a file in the workspace.",
            "parameters": {
                "type": "object",
                "required": ["path", "content"],
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            },
        },
    }
]
TERMINAL = ("rejected", "succeeded", "failed", "unknown")


def append_entry(path: Path, record: dict[str, Any]) -> None:
    """Append one record and make it durable before returning (seed 000: running is on
    disk before the side effect)."""
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    with open(path, "a", encoding="utf-8") as file:
        file.write(line)
        file.flush()
        os.fsync(file.fileno())
    if created:  # a new file's name is durable only once its directory is synced
        sync_directory(path.parent)


def sync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_entries(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    # The last piece has no newline: empty, or a line the previous process died writing.
    return [json.loads(line) for line in lines[:-1] if line.strip()]


def drop_torn_tail(path: Path) -> None:
    """A last line without its newline is one a dead process was writing: cut it off before
    anything is appended, or the next line would be glued to it (and the file corrupt)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)
            file.flush()
            os.fsync(file.fileno())


def write_file(workspace: Path, path: str, content: str) -> dict[str, Any]:
    target = (workspace / path).resolve()
    if workspace.resolve() not in target.parents:
        return {"ok": False, "code": "PERMISSION_DENIED", "content": f"{path} is outside the workspace"}
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(content, encoding="utf-8")
    os.replace(temporary, target)
    return {"ok": True, "status": "succeeded", "path": path, "bytes": len(content.encode("utf-8"))}


def arguments_sha256(arguments: dict[str, Any]) -> str:
    canonical = json.dumps(arguments, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Agent:
    def __init__(self, session: Path, workspace: Path, client: OpenAI, model: str) -> None:
        self.session = session
        self.workspace = workspace
        self.client = client
        self.model = model

    def messages(self) -> list[dict[str, Any]]:
        return [e["message"] for e in load_entries(self.session) if e.get("type") == "message"]

    def ledger(self, call: dict[str, Any], execution_id: str, status: str, result: Any = None) -> None:
        arguments = json.loads(call["function"]["arguments"] or "{}")
        record: dict[str, Any] = {
            "type": "tool_execution",
            "execution_id": execution_id,
            "tool_call_id": call["id"],
            "status": status,
            "tool_name": call["function"]["name"],
            "idempotency_key": f"{call['function']['name']}:{arguments_sha256(arguments)[:16]}",
            "arguments_sha256": arguments_sha256(arguments),
        }
        if result is not None:
            record["result"] = result
        append_entry(self.session, record)

    def publish(self, call: dict[str, Any], result: dict[str, Any]) -> None:
        message = {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
        append_entry(self.session, {"type": "message", "message": message})

    def approve(self, call: dict[str, Any], *, again: bool) -> bool:
        word = "again " if again else ""
        answer = input(f"Approve {word}{call['function']['name']} ({call['id']})? [y/n] ")
        return answer.strip().lower() == "y"

    def run_call(self, call: dict[str, Any], *, again: bool = False, execution_id: str = "") -> None:
        execution_id = execution_id or f"exec_{uuid.uuid4().hex[:12]}"
        if not self.approve(call, again=again):
            self.ledger(call, execution_id, "rejected")
            self.publish(call, {"ok": False, "code": "REJECTED", "content": "the user said no"})
            return
        self.ledger(call, execution_id, "approved")
        self.ledger(call, execution_id, "running")
        arguments = json.loads(call["function"]["arguments"] or "{}")
        result = write_file(self.workspace, str(arguments.get("path")), str(arguments.get("content")))
        self.ledger(call, execution_id, "succeeded" if result["ok"] else "failed", result)
        self.publish(call, result)

    def loop(self) -> None:
        while True:
            response = self.client.chat.completions.create(
                model=self.model,
                messages=self.messages(),
                tools=TOOLS,  # type: ignore[arg-type]
            )
            reply = response.choices[0].message
            calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in reply.tool_calls or ()
            ]
            message: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
            if calls:
                message["tool_calls"] = calls
            append_entry(self.session, {"type": "message", "message": message})
            if not calls:
                print(reply.content)
                return
            for call in calls:
                self.run_call(call)

    def recover(self) -> None:
        """Finish what a previous process left: every tool call without a result, then the turn."""
        entries = load_entries(self.session)
        results = {e["message"].get("tool_call_id") for e in entries if e.get("type") == "message"}
        for entry in entries:
            message = entry.get("message") or {}
            for call in message.get("tool_calls") or ():
                if call["id"] in results:
                    continue
                history = [
                    e
                    for e in entries
                    if e.get("type") == "tool_execution" and e["tool_call_id"] == call["id"]
                ]
                latest = history[-1] if history else None
                if latest is None:
                    self.run_call(call)
                elif latest["status"] == "approved":  # nothing started: ask again, same attempt
                    self.run_call(call, again=True, execution_id=latest["execution_id"])
                elif latest["status"] in ("running", "unknown"):  # may have written: say so, redo
                    if latest["status"] == "running":
                        self.ledger(call, latest["execution_id"], "unknown")
                    self.run_call(call, again=True)
                elif latest["status"] in TERMINAL:
                    self.publish(call, latest.get("result") or {"ok": False, "code": "REJECTED"})
        messages = self.messages()
        if messages and (messages[-1]["role"] != "assistant" or messages[-1].get("tool_calls")):
            self.loop()

    def turn(self, text: str) -> None:
        append_entry(self.session, {"type": "message", "message": {"role": "user", "content": text}})
        self.loop()


def main() -> None:
    workspace = Path.cwd()
    session = Path(os.environ.get("NOTES_AGENT_SESSION", ".agent_state/notes-agent.jsonl"))
    agent = Agent(
        session, workspace, OpenAI(max_retries=0), os.environ.get("NOTES_AGENT_MODEL", "gpt-4o-mini")
    )
    drop_torn_tail(session)
    agent.recover()
    while True:
        try:
            text = input("> ")
        except EOFError:
            return
        if text.strip():
            agent.turn(text)


if __name__ == "__main__":
    main()
