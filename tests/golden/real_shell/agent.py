"""shell-agent: a small helper whose one tool, ``run_bash(cmd)``, runs the command in a REAL
shell (``/bin/sh -c`` through ``subprocess``) in its working directory. It was written
without crashmatrix in mind:

* its journal (``.shell/journal.jsonl``, every line fsynced) holds chat lines and step lines
  whose ``state`` goes ok -> started -> finished | in_doubt;
* a command is run once: after a restart, a step left ``started`` may or may not have run
  (an ``echo >> audit.log`` appends one more line on every run), so it is closed
  ``in_doubt`` and the model is told "MAYBE: ..." -- never run again;
* a real shell does not fsync what it writes: after a command the agent syncs the files the
  command changed (their mtime moved) and their directories before it records ``finished``,
  so a power loss cannot take an effect the journal says happened.

It asks no one before running a command (its user allowed the tool once for all).
``SHELL_AGENT_BUG=rerun_after_crash`` plants a bug: a command left ``started`` by a crash is
run again (the append is made twice).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

from openai import OpenAI

BUG = os.environ.get("SHELL_AGENT_BUG", "")
JOURNAL = Path(".shell") / "journal.jsonl"
SYSTEM = "You are shell-agent. Use run_bash to run shell commands in the project directory."
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "run_bash",
            "description": "Run a shell command in the project directory.",
            "parameters": {"type": "object", "required": ["cmd"], "properties": {"cmd": {"type": "string"}}},
        },
    }
]


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Journal:
    """Append-only JSONL, every line durable before ``write`` returns."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(json.dumps({**record, "at": round(time.time(), 3)}) + "\n")
            file.flush()
            os.fsync(file.fileno())
        if created:
            fsync_path(self.path.parent)

    def read(self) -> list[dict[str, Any]]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        if data and not data.endswith(b"\n"):  # a line a dead process was writing
            with open(self.path, "r+b") as file:
                file.truncate(data.rfind(b"\n") + 1)
                file.flush()
                os.fsync(file.fileno())
            data = data[: data.rfind(b"\n") + 1]
        return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def mtimes(root: Path) -> dict[Path, int]:
    """Every file under ``root`` but the agent's own folder, with its modification time."""
    seen: dict[Path, int] = {}
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != JOURNAL.parts[0]]
        for name in filenames:
            path = Path(directory) / name
            try:
                seen[path] = path.stat().st_mtime_ns
            except OSError:
                continue
    return seen


def run_bash(cmd: str) -> tuple[int, str]:
    """Run ``cmd`` in a real shell here; sync what it changed. (exit status, output)."""
    before = mtimes(Path.cwd())
    done = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, timeout=60)
    for path, mtime in mtimes(Path.cwd()).items():
        if before.get(path) != mtime:
            fsync_path(path)
            fsync_path(path.parent)
    return done.returncode, (done.stdout + done.stderr)[-2000:]


class ShellAgent:
    def __init__(self, journal: Journal, client: OpenAI, model: str) -> None:
        self.journal = journal
        self.client = client
        self.model = model

    def step(self, call_id: str, step: str, state: str, cmd: str, **details: Any) -> None:
        # What was allowed, as a digest of the arguments (canonical JSON: sorted, compact).
        canonical = json.dumps({"cmd": cmd}, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        record = {
            "kind": "step",
            "call": call_id,
            "step": step,
            "state": state,
            "tool": "run_bash",
            "cmd": cmd,
            "digest": hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
        }
        self.journal.write({**record, **details})

    def tell(self, call_id: str, text: str) -> None:
        self.journal.write({"kind": "chat", "role": "tool", "tool_call_id": call_id, "content": text})

    def conversation(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for line in self.journal.read():
            if line.get("kind") != "chat":
                continue
            message: dict[str, Any] = {"role": line["role"], "content": line.get("content") or ""}
            if line.get("tool_calls"):
                message["tool_calls"] = line["tool_calls"]
            if line["role"] == "tool":
                message["tool_call_id"] = line["tool_call_id"]
            out.append(message)
        return out

    def handle(self, call_id: str, arguments: str) -> None:
        try:
            cmd = json.loads(arguments or "{}").get("cmd")
        except (ValueError, AttributeError):
            cmd = None
        if not isinstance(cmd, str) or not cmd.strip():
            self.tell(call_id, "FAILED: run_bash needs a command (cmd)")
            return
        step = f"step-{secrets.token_hex(6)}"
        self.step(call_id, step, "ok", cmd)
        self.perform(call_id, step, cmd)

    def perform(self, call_id: str, step: str, cmd: str) -> None:
        self.step(call_id, step, "started", cmd)
        status, output = run_bash(cmd)
        if status == 0:
            text = f"exit 0: {output.strip()}" if output.strip() else "exit 0"
            self.step(call_id, step, "finished", cmd, result=text)
        else:
            text = f"FAILED (exit {status}): {output.strip()}"
            self.step(call_id, step, "failed", cmd, result=text)
        self.tell(call_id, text)

    def settle(self, call_id: str, arguments: str, steps: list[dict[str, Any]]) -> None:
        """A call with no Tool Result after a restart."""
        if not steps:
            self.handle(call_id, arguments)
            return
        last = steps[-1]
        if last["state"] == "ok":  # allowed, never started: nothing ran yet
            self.step(call_id, last["step"], "ok", last["cmd"])
            self.perform(call_id, last["step"], last["cmd"])
            return
        if last["state"] == "started":
            if BUG == "rerun_after_crash":
                step = f"step-{secrets.token_hex(6)}"  # BUG: it may have run already
                self.step(call_id, step, "ok", last["cmd"])
                self.perform(call_id, step, last["cmd"])
                return
            text = f"MAYBE: {last['cmd']!r} may or may not have run (the agent stopped); not run again"
            self.step(call_id, last["step"], "in_doubt", last["cmd"], result=text)
            self.tell(call_id, text)
            return
        self.tell(call_id, last["result"])  # finished, failed, in_doubt: told as it was

    def recover(self) -> None:
        """Settle every call without a Tool Result, in order, then finish the turn. (Each
        call id is taken as unique in the journal: a small agent, one conversation.)"""
        lines = self.journal.read()
        for index, line in enumerate(lines):
            if line.get("kind") != "chat":
                continue
            for raw in line.get("tool_calls") or ():
                later = lines[index + 1 :]
                if any(o.get("kind") == "chat" and o.get("tool_call_id") == raw["id"] for o in later):
                    continue
                steps = [o for o in later if o.get("kind") == "step" and o["call"] == raw["id"]]
                self.settle(raw["id"], raw["function"]["arguments"], steps)
        messages = self.conversation()
        if messages and (messages[-1]["role"] != "assistant" or messages[-1].get("tool_calls")):
            self.think()

    def think(self) -> None:
        while True:
            completion = self.client.chat.completions.create(
                model=self.model,
                messages=[{"role": "system", "content": SYSTEM}, *self.conversation()],  # type: ignore[list-item]
                tools=TOOLS,  # type: ignore[arg-type]
            )
            reply = completion.choices[0].message
            calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in reply.tool_calls or ()
            ]
            record: dict[str, Any] = {"kind": "chat", "role": "assistant", "content": reply.content or ""}
            if calls:
                record["tool_calls"] = calls
            self.journal.write(record)
            if not calls:
                print(f"shell-agent: {reply.content or ''}")
                return
            for raw in calls:
                if raw["function"]["name"] == "run_bash":
                    self.handle(raw["id"], raw["function"]["arguments"])
                else:
                    self.tell(raw["id"], f"FAILED: there is no tool {raw['function']['name']!r}")

    def chat(self, text: str) -> None:
        self.journal.write({"kind": "chat", "role": "user", "content": text})
        self.think()


def main() -> None:
    client = OpenAI(
        base_url=os.environ.get("OPENAI_BASE_URL"), api_key=os.environ.get("OPENAI_API_KEY"), max_retries=0
    )
    agent = ShellAgent(Journal(JOURNAL), client, os.environ.get("SHELL_AGENT_MODEL", "gpt-4o-mini"))
    agent.recover()
    while True:
        try:
            text = input("you> ")
        except EOFError:
            return
        if text.strip():
            agent.chat(text)


if __name__ == "__main__":
    main()
