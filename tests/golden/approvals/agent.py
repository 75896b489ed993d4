"""shell-desk: a small agent that asks before it acts, in Chinese, and names the tool in one
of its two approval prompts only:

    允许执行 run_bash(npm test)？[y/N]      before a shell command (an order, an email alike)
    允许写入？[y/N]                         before it writes a file (no tool named)

read_file needs no approval. It knows nothing of crashmatrix: the model at $OPENAI_BASE_URL,
its tools at $CRASHMATRIX_TOOLS_URL (POST /<tool>, JSON arguments), its session a JSONL file
($CRASHMATRIX_SESSION_PATH) of messages and seed 004 ledger lines (callId, stepId, toolName,
inputHash, idempotencyKey, status approved / started / succeeded / failed / uncertain).

A "no" means the tool is not run and the model is told it was rejected ({"ok": false, "code":
"REJECTED"}). Recovery after a restart, for a call without a Tool Result:

* no ledger line, or ``approved`` only: an approval is not kept across a restart (the person
  may have changed their mind), so it asks again; the approved line is written but not synced
  for that reason (the started line that follows is);
* ``started`` (it may have run): ``uncertain``, then it asks again: yes runs it again under a
  new step with the same key, no tells the model a person must check (MANUAL_CHECK_REQUIRED);
* ``succeeded`` / ``failed``: the stored result is the Tool Result.

``GOLDEN_APPROVALS_BUG=ignore_no`` plants the bug a crash harness must catch: a "no" is read,
then the tool runs anyway and its result is passed on.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

# The agent's tools -> the endpoint that runs each one in production (here: the harness's).
ENDPOINTS = {
    "run_bash": "run_command",
    "write": "write_file",
    "read_file": "read_file",
    "create_order": "create_order",
    "send_email": "send_email",
}
BUG = os.environ.get("GOLDEN_APPROVALS_BUG", "")


def session() -> Path:
    return Path(os.environ.get("CRASHMATRIX_SESSION_PATH", ".shell-desk/session.jsonl"))


def post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return dict(json.load(response))
    except urllib.error.HTTPError as error:
        raise SystemExit(f"{url}: HTTP {error.code}: {error.read()[:300]!r}") from error


def run_tool(url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """(ledger status, result) of one tool request: an error answer ran nothing (failed); a
    request sent whose answer never came back whole (the tools server gone mid-call, cut off,
    not a JSON object) may have run (uncertain, said so)."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            result = json.loads(response.read())
        if not isinstance(result, dict):
            raise ValueError(f"a JSON {type(result).__name__}, not the result object")
    except urllib.error.HTTPError as error:
        return "failed", {"ok": False, "code": f"HTTP_{error.code}", "content": repr(error.read()[:300])}
    except (OSError, http.client.HTTPException, ValueError) as error:
        why = f"no readable answer ({type(error).__name__}: {error}); it may have run: check first"
        return "uncertain", {"ok": False, "code": "SIDE_EFFECT_UNCERTAIN", "content": why}
    return ("succeeded" if result.get("ok") else "failed"), result


def sync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append(record: dict[str, Any], *, sync: bool = True) -> None:
    path = session()
    new_directory = not path.parent.exists()
    created = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        file.flush()
        if sync:
            os.fsync(file.fileno())
    # A new file (and folder) survives a power loss only once its directory entry is synced.
    if created:
        sync_directory(path.parent)
    if new_directory:
        sync_directory(path.parent.parent)


def drop_torn_tail() -> None:
    """A last line without its newline is one a dead process was writing: cut it off."""
    path = session()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)
            file.flush()
            os.fsync(file.fileno())


def entries() -> list[dict[str, Any]]:
    path = session()
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")[:-1] if line]


def input_hash(arguments: str) -> str:
    canonical = json.dumps(
        json.loads(arguments or "{}"), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def ledger(
    call: dict[str, Any], step: str, status: str, key: str, result: Any = None, *, sync: bool = True
) -> None:
    record: dict[str, Any] = {
        "kind": "ledger",
        "callId": call["id"],
        "stepId": step,
        "toolName": call["function"]["name"],
        "inputHash": input_hash(call["function"]["arguments"]),
        "idempotencyKey": key,
        "status": status,
    }
    if result is not None:
        record["result"] = result
    append(record, sync=sync)


def tell(call: dict[str, Any], result: dict[str, Any]) -> None:
    content = json.dumps(result, ensure_ascii=False)
    append({"kind": "message", "message": {"role": "tool", "tool_call_id": call["id"], "content": content}})


def approve(call: dict[str, Any]) -> bool:
    name = call["function"]["name"]
    if name == "read_file":
        return True
    if name == "write":
        question = "允许写入？[y/N] "
    else:
        shown = ", ".join(
            " ".join(str(v).split()) for v in json.loads(call["function"]["arguments"]).values()
        )
        question = f"允许执行 {name}({shown})？[y/N] "
    answer = input(question).strip().lower() == "y"
    return answer or BUG == "ignore_no"  # BUG: the answer is read, then ignored


def new_step() -> str:
    return f"step_{uuid.uuid4().hex[:10]}"


def run(call: dict[str, Any], step: str, key: str) -> None:
    """Run an approved call (its step approved) and tell the model its result."""
    ledger(call, step, "started", key)
    headers = {"X-Tool-Call-Id": call["id"], "X-Execution-Id": step, "Idempotency-Key": key}
    arguments = json.loads(call["function"]["arguments"])
    endpoint = f"{os.environ['CRASHMATRIX_TOOLS_URL'].rstrip('/')}/{ENDPOINTS[call['function']['name']]}"
    status, result = run_tool(endpoint, arguments, headers)
    ledger(call, step, status, key, result)
    tell(call, result)


def refuse(call: dict[str, Any], step: str, key: str, result: dict[str, Any]) -> None:
    ledger(call, step, "rejected", key, result)
    tell(call, result)


def execute(call: dict[str, Any], key: str, *, step: str | None = None, may_have_run: bool = False) -> None:
    """Ask, then run or refuse. ``step``: the execution an earlier life approved and never
    started (asked again, it goes on); ``may_have_run``: an earlier attempt started and its end
    is unknown, so a "no" tells the model a person must check, not that nothing happened."""
    if not approve(call):
        if may_have_run:
            why = {
                "ok": False,
                "code": "MANUAL_CHECK_REQUIRED",
                "content": "it may have run before a restart; please check",
            }
            refuse(call, new_step(), key, why)
        else:
            refuse(
                call,
                step or new_step(),
                key,
                {"ok": False, "code": "REJECTED", "content": "the user rejected it"},
            )
        return
    step = step or new_step()
    # Not synced: a lost approval is asked again after a restart anyway.
    ledger(call, step, "approved", key, sync=False)
    run(call, step, key)


def think() -> None:
    while True:
        history = [e["message"] for e in entries() if e["kind"] == "message"]
        reply = post(
            f"{os.environ['OPENAI_BASE_URL'].rstrip('/')}/chat/completions",
            {"model": "shell-desk", "messages": history},
        )
        message = reply["choices"][0]["message"]
        saved: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            saved["tool_calls"] = message["tool_calls"]
        append({"kind": "message", "message": saved})
        if not message.get("tool_calls"):
            print(message.get("content"))
            return
        for call in message["tool_calls"]:
            execute(call, f"shell-desk:{call['id']}")


def recover() -> None:
    log = entries()
    answered = {e["message"].get("tool_call_id") for e in log if e["kind"] == "message"}
    for entry in log:
        for call in entry.get("message", {}).get("tool_calls") or ():
            if call["id"] in answered:
                continue
            steps = [e for e in log if e["kind"] == "ledger" and e["callId"] == call["id"]]
            last = steps[-1] if steps else None
            key = last["idempotencyKey"] if last else f"shell-desk:{call['id']}"
            status = last["status"] if last is not None else None
            if last is not None and "result" in last:
                tell(call, last["result"])  # it ended before the restart: its stored result
            elif last is not None and status in ("started", "uncertain"):
                if status == "started":
                    ledger(call, last["stepId"], "uncertain", key)
                execute(call, key, may_have_run=True)
            elif last is not None and status == "approved":
                execute(call, key, step=last["stepId"])  # approved, never started: asked again
            else:
                execute(call, key)
    history = [e["message"] for e in entries() if e["kind"] == "message"]
    if history and (history[-1]["role"] != "assistant" or history[-1].get("tool_calls")):
        think()


def main() -> None:
    drop_torn_tail()
    recover()
    while True:
        try:
            line = input("> ")
        except EOFError:
            return
        if not line.strip():
            return
        append({"kind": "message", "message": {"role": "user", "content": line.strip()}})
        think()


if __name__ == "__main__":
    main()
