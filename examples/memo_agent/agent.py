"""memo-agent: an office helper that mails memos, orders supplies and saves notes.

It was written by a team that never heard of crashmatrix, in its own words:

* its tools are ``mail(recipient, title, text)``, ``order(product, count)`` and
  ``save_note(filename, text)``, and they answer in plain sentences, not JSON: "mailed ...",
  "ERROR: ...", "UNSURE: ...", "DECLINED by the user: ...", "CONFLICT: ...", "ALREADY PLACED: ...";
* its journal (``.memo/journal.jsonl``) holds chat lines (``entry: chat``) and attempt lines
  (``entry: attempt``) whose ``phase`` goes cleared -> in_flight -> done | failed | in_doubt,
  or declined; every line is fsynced before the agent goes on;
* mail goes out through a Maildir outbox: the message is written to ``outbox/tmp/`` and
  renamed into ``outbox/new/``, where the relay picks it up. Nothing deduplicates: two files
  are two emails;
* orders go to the order service over HTTP (``MEMO_AGENT_ORDERS_URL``) with an
  ``Idempotency-Key`` the runtime builds from the turn, the call id and the arguments'
  digest: the service places at most one order per key and replays its first answer;
* notes are written atomically (temporary file, rename); the attempt records the file's
  digest before (``base``) and the planned one (``after``).

After a restart, every tool call without a Tool Result is settled before the model is asked
again (seed 000's table): no attempt or ``cleared`` last -> asked again (the same attempt
goes on when the user still agrees); ``in_flight`` last -> the attempt is closed
``in_doubt`` first, then the tool decides: an order is placed again under the SAME key, a
note is checked against base and after (already there, write again, or conflict), a mail is
never sent again and the model is told it is unsure; a terminal attempt -> its stored
outcome is told again. Then the turn goes on without a new user message. A call is a call
site: providers reuse ids (``call_0``) in every turn, so a call owns the journal only up to
the next user line or the next assistant line reusing its id.

``MEMO_AGENT_BUG=resend_after_crash`` plants a bug: a mail left in flight by a crash is sent
again.
"""

from __future__ import annotations

import email.message
import hashlib
import http.client
import json
import os
import secrets
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openai import OpenAI

BUG = os.environ.get("MEMO_AGENT_BUG", "")
JOURNAL = Path(".memo") / "journal.jsonl"
OUTBOX = Path("outbox")
MAX_ORDER_TRIES = 3  # attempts of one order under its key before the model is told it is unsure
SYSTEM = "You are memo-agent. Use the tools to mail memos, order supplies and save notes."
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "mail",
            "description": "Mail a memo to one recipient.",
            "parameters": {
                "type": "object",
                "required": ["recipient", "title", "text"],
                "properties": {
                    "recipient": {"type": "string"},
                    "title": {"type": "string"},
                    "text": {"type": "string"},
                },
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "order",
            "description": "Order office supplies.",
            "parameters": {
                "type": "object",
                "required": ["product", "count"],
                "properties": {"product": {"type": "string"}, "count": {"type": "integer"}},
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "save_note",
            "description": "Replace the whole content of a note file in the workspace.",
            "parameters": {
                "type": "object",
                "required": ["filename", "text"],
                "properties": {"filename": {"type": "string"}, "text": {"type": "string"}},
            },
        },
    },
]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def arguments_digest(arguments: dict[str, Any]) -> str:
    """What the user approved, as a digest: canonical JSON (sorted keys, compact)."""
    canonical = json.dumps(arguments, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return digest(canonical.encode("utf-8"))


def fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- the journal ---------------------------------------------------------------------------


class Journal:
    """Append-only JSONL: every line durable before ``write`` returns."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        line = json.dumps({**record, "at": round(time.time(), 3)}, ensure_ascii=False)
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(line + "\n")
            file.flush()
            os.fsync(file.fileno())
        if created:
            # A new file's name is durable only once its directory is synced: without this
            # a power loss took the whole journal (crashmatrix's power column found it).
            fsync_directory(self.path.parent)

    def read(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        # The piece after the last newline is empty, or a line a dead process was writing.
        return [json.loads(line) for line in text.split("\n")[:-1] if line.strip()]


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


# -- the tools -----------------------------------------------------------------------------


class InDoubt(Exception):
    """The request went out and no answer came back: it may or may not have acted."""


def make_durable_directory(path: Path) -> None:
    """``mkdir -p``, each new directory synced into its parent: a directory's name is durable
    only then, and a power loss took the whole outbox with the mail in it (crashmatrix's
    power column found it)."""
    if path.exists():
        return
    make_durable_directory(path.parent)
    path.mkdir(exist_ok=True)
    fsync_directory(path.parent)


def deliver_mail(outbox: Path, recipient: str, title: str, text: str) -> str:
    """Maildir delivery: write the message under tmp/, then rename it into new/ (the relay
    takes what is in new/). Returns the Message-ID."""
    message = email.message.EmailMessage()
    message_id = f"<{time.time_ns()}.{secrets.token_hex(4)}@memo-agent>"
    message["From"] = "memo-agent@example.com"
    message["To"] = recipient
    message["Subject"] = title
    message["Message-ID"] = message_id
    message.set_content(text)
    for folder in ("tmp", "new"):
        make_durable_directory(outbox / folder)
    name = f"{time.time_ns()}.{os.getpid()}.{secrets.token_hex(4)}.eml"
    staged = outbox / "tmp" / name
    with open(staged, "wb") as file:
        file.write(bytes(message))
        file.flush()
        os.fsync(file.fileno())
    try:
        os.rename(staged, outbox / "new" / name)
    except OSError as error:
        raise OSError(f"the mail was not handed to the relay ({error})") from error
    try:
        fsync_directory(outbox / "new")
    except OSError as error:
        raise InDoubt(f"the mail was handed over but not synced ({error})") from error
    return message_id


def place_order(orders_url: str, product: str, count: int, key: str) -> tuple[int, dict[str, Any], bool]:
    """POST /orders under ``key``: (status, body, replayed). Raises ConnectionError when
    nothing was sent, InDoubt when the request went out and the answer did not come back."""
    parts = urllib.parse.urlsplit(orders_url)
    connection = http.client.HTTPConnection(parts.hostname or "localhost", parts.port, timeout=30)
    try:
        try:
            connection.connect()
        except OSError as error:
            raise ConnectionError(f"cannot reach the order service ({error})") from error
        try:
            connection.request(
                "POST",
                f"{parts.path.rstrip('/')}/orders",
                body=json.dumps({"product": product, "count": count}).encode("utf-8"),
                headers={"Content-Type": "application/json", "Idempotency-Key": key},
            )
            response = connection.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as error:
            raise InDoubt(f"{type(error).__name__}: {error}") from error
    finally:
        connection.close()
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        body = {"raw": raw[:200].decode("utf-8", "replace")}
    replayed = response.getheader("Idempotent-Replayed", "").lower() == "true"
    return response.status, body if isinstance(body, dict) else {"body": body}, replayed


def note_path(workspace: Path, filename: str) -> Path | None:
    """The note's path if it stays inside the workspace and out of the agent's own folders."""
    if not filename or Path(filename).is_absolute():
        return None
    path = (workspace / filename).resolve()
    root = workspace.resolve()
    if root not in path.parents:
        return None
    if path.relative_to(root).parts[0] in (".memo", OUTBOX.name):
        return None
    return path


def file_digest(path: Path) -> str:
    """The file's digest, or "absent"."""
    try:
        return digest(path.read_bytes())
    except FileNotFoundError:
        return "absent"


def save_note(path: Path, text: str) -> None:
    """Replace the file's content atomically (temporary file, rename, directory synced)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.memo-{secrets.token_hex(4)}")
    with open(staged, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(staged, path)
    fsync_directory(path.parent)


# -- the agent -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One tool call at its call site: the id, the tool, the arguments, the user turn."""

    id: str
    tool: str
    arguments_json: str
    turn: int

    @property
    def arguments(self) -> dict[str, Any]:
        try:
            value = json.loads(self.arguments_json or "{}")
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def digest(self) -> str:
        return arguments_digest(self.arguments)

    @property
    def key(self) -> str:
        """The order's idempotency key: one business action is one call site with its
        arguments (the turn separates a reused ``call_0``)."""
        return f"memo-t{self.turn}-{self.id}-{self.digest[:16]}"

    def describe(self) -> str:
        a = self.arguments
        if self.tool == "mail":
            return f"the mail to {a.get('recipient')} ({a.get('title')!r})"
        if self.tool == "order":
            return f"the order of {a.get('count')} x {a.get('product')}"
        return f"the note {a.get('filename')}"


class MemoAgent:
    def __init__(
        self, workspace: Path, journal: Journal, client: OpenAI, model: str, orders_url: str
    ) -> None:
        self.workspace = workspace
        self.journal = journal
        self.client = client
        self.model = model
        self.orders_url = orders_url

    # -- journal lines ---------------------------------------------------------------------

    def note_attempt(self, call: Call, attempt: str, phase: str, **details: Any) -> None:
        record = {
            "entry": "attempt",
            "call": call.id,
            "attempt": attempt,
            "phase": phase,
            "tool": call.tool,
            "digest": call.digest,
        }
        if call.tool == "order":
            record["key"] = call.key
        self.journal.write({**record, **details})

    def tell(self, call: Call, text: str) -> None:
        self.journal.write({"entry": "chat", "role": "tool", "tool_call_id": call.id, "content": text})

    def conversation(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for line in self.journal.read():
            if line.get("entry") != "chat":
                continue
            message = {"role": line["role"], "content": line.get("content") or ""}
            if line.get("tool_calls"):
                message["tool_calls"] = line["tool_calls"]
            if line["role"] == "tool":
                message["tool_call_id"] = line["tool_call_id"]
            out.append(message)
        return out

    # -- running a call --------------------------------------------------------------------

    def ask(self, call: Call, *, again: bool) -> bool:
        more = " once more" if again else ""
        answer = input(f"memo-agent wants to use {call.tool} ({call.id}){more}. Allow? [yes/no] ")
        return answer.strip().lower() in ("y", "yes")

    def refusal(self, call: Call) -> str | None:
        """Why the call cannot run at all (checked before anyone is asked), or None."""
        a = call.arguments
        if call.tool == "mail":
            if not all(isinstance(a.get(k), str) for k in ("recipient", "title", "text")):
                return "mail needs recipient, title and text"
        elif call.tool == "order":
            count = a.get("count")
            if not isinstance(a.get("product"), str) or not isinstance(count, int) or count < 1:
                return "order needs a product and a positive count"
        elif call.tool == "save_note":
            if not isinstance(a.get("text"), str) or not isinstance(a.get("filename"), str):
                return "save_note needs filename and text"
            if note_path(self.workspace, a["filename"]) is None:
                return f"{a['filename']} is outside the notes workspace; nothing was written"
        else:
            return f"there is no tool {call.tool!r}"
        return None

    def handle(self, call: Call) -> None:
        """A new call: checked, asked, run."""
        problem = self.refusal(call)
        if problem is not None:
            self.tell(call, f"ERROR: {problem}")
            return
        attempt = f"try-{secrets.token_hex(6)}"
        if not self.ask(call, again=False):
            self.decline(call, attempt)
            return
        self.note_attempt(call, attempt, "cleared")
        self.perform(call, attempt)

    def decline(self, call: Call, attempt: str, *, earlier: bool = False) -> None:
        """The user said no to ``attempt``. ``earlier``: an earlier attempt of the call may
        have acted (it was in flight or in doubt), so "not carried out" would be untrue."""
        text = f"DECLINED by the user: {call.describe()} was not carried out."
        if earlier:
            text = self.unsure(call, "an earlier attempt may have acted; the user refused another")
        self.note_attempt(call, attempt, "declined", outcome=text)
        self.tell(call, text)

    def perform(self, call: Call, attempt: str, *, tries: int = 1) -> None:
        """The attempt goes in flight, runs, and its outcome is journalled, then told."""
        a = call.arguments
        plan: dict[str, Any] = {}
        if call.tool == "save_note":
            path = note_path(self.workspace, a["filename"])
            assert path is not None  # refusal() checked it
            plan = {"base": file_digest(path), "after": digest(a["text"].encode("utf-8"))}
        self.note_attempt(call, attempt, "in_flight", **plan)
        phase, text = self.run_tool(call, plan)
        self.note_attempt(call, attempt, phase, outcome=text, **plan)
        if phase == "in_doubt" and call.tool == "order" and tries < MAX_ORDER_TRIES:
            # The service keeps one order per key: asking again under the same key is safe.
            self.retry_order(call, tries=tries + 1)
            return
        self.tell(call, text)

    def retry_order(self, call: Call, *, tries: int) -> None:
        attempt = f"try-{secrets.token_hex(6)}"
        self.note_attempt(call, attempt, "cleared", retry_of_key=call.key)
        self.perform(call, attempt, tries=tries)

    def run_tool(self, call: Call, plan: dict[str, Any]) -> tuple[str, str]:
        """(phase, what the model is told)."""
        a = call.arguments
        if call.tool == "mail":
            try:
                deliver_mail(self.workspace / OUTBOX, a["recipient"], a["title"], a["text"])
            except InDoubt as error:
                return "in_doubt", self.unsure(call, str(error))
            except OSError as error:
                return "failed", f"ERROR: {call.describe()} could not be queued ({error}); nothing was sent."
            return "done", f"mailed {a['title']!r} to {a['recipient']}"
        if call.tool == "order":
            try:
                status, body, replayed = place_order(self.orders_url, a["product"], a["count"], call.key)
            except ConnectionError as error:
                return "failed", f"ERROR: {error}; nothing was ordered."
            except InDoubt as error:
                return "in_doubt", self.unsure(call, str(error))
            number = body.get("id", "?")
            if 200 <= status < 300 and replayed:
                return "done", (
                    f"ALREADY PLACED: order {number} ({a['count']} x {a['product']}) was placed by an "
                    "earlier attempt of this request; nothing new was ordered."
                )
            if 200 <= status < 300:
                return "done", f"placed order {number}: {a['count']} x {a['product']}"
            error = body.get("error") if isinstance(body.get("error"), dict) else {}
            why = f"{status} {error.get('code', '')}: {error.get('message', '')}".strip()
            if status >= 500 or status == 409:
                return "in_doubt", self.unsure(call, f"the order service answered {why}")
            return "failed", f"ERROR: the order service refused ({why}); nothing was ordered."
        path = note_path(self.workspace, a["filename"])
        assert path is not None
        if plan.get("base") == plan.get("after"):
            return "done", f"saved {a['filename']} (it already had this content)"
        save_note(path, a["text"])
        return "done", f"saved {a['filename']} ({len(a['text'].encode('utf-8'))} bytes)"

    def unsure(self, call: Call, why: str) -> str:
        again = "ask me to check" if call.tool == "order" else "check the outbox before asking me again"
        return (
            f"UNSURE: {call.describe()} may or may not have happened ({why}); I did not repeat it: {again}."
        )

    # -- after a restart -------------------------------------------------------------------

    def settle(self, call: Call, attempts: list[dict[str, Any]]) -> None:
        """Seed 000's table for one call that has no Tool Result yet."""
        last = attempts[-1] if attempts else None
        if last is None:
            self.handle(call)  # never got as far as the journal: route it again
            return
        if last["digest"] != call.digest:
            # What is saved is not what was approved: neither run nor reuse anything.
            text = f"CONFLICT: {call.describe()} no longer matches what was approved; I left it."
            closing = {"in_flight": "in_doubt", "cleared": "declined"}.get(last["phase"])
            if closing is not None:
                # Closed under what the attempt recorded (its digest and key), not the edited
                # call's: written with the edited digest, a second crash before the model is
                # told would find a match and run the edited call.
                recorded = {k: v for k, v in last.items() if k not in ("at", "outcome")}
                self.journal.write({**recorded, "phase": closing, "outcome": text})
            self.tell(call, text)
            return
        phase = last["phase"]
        if phase == "cleared":
            # Approved, never started: the approval may be stale, so ask again.
            if self.ask(call, again=True):
                self.perform(call, last["attempt"])
            else:
                acted = any(a["phase"] in ("in_flight", "in_doubt") for a in attempts)
                self.decline(call, last["attempt"], earlier=acted)
            return
        if phase == "in_flight":
            text = self.unsure(call, "the agent stopped while it was running")
            self.note_attempt(call, last["attempt"], "in_doubt", outcome=text, **_plan(last))
            last = {**last, "phase": "in_doubt", "outcome": text}
            attempts = [*attempts, last]
            phase = "in_doubt"
        if phase == "in_doubt":
            self.resolve_doubt(call, last, attempts)
            return
        self.tell(call, last["outcome"])  # done, failed, declined: told again as it was

    def resolve_doubt(self, call: Call, last: dict[str, Any], attempts: list[dict[str, Any]]) -> None:
        """An attempt that may have acted, by what its tool can prove."""
        if call.tool == "order":
            tries = sum(1 for a in attempts if a["phase"] == "in_doubt")
            if tries < MAX_ORDER_TRIES:
                self.retry_order(call, tries=tries + 1)
                return
        elif call.tool == "save_note":
            path = note_path(self.workspace, call.arguments["filename"])
            assert path is not None
            now = file_digest(path)
            if now in (last.get("base"), last.get("after")):
                # Untouched since (base) or already written (after): the same write is safe.
                attempt = f"try-{secrets.token_hex(6)}"
                self.note_attempt(call, attempt, "cleared", after_doubt=last["attempt"])
                self.perform(call, attempt)
                return
            self.tell(
                call,
                f"CONFLICT: {call.arguments['filename']} was changed by someone else since the "
                "interrupted save; I left it as it is.",
            )
            return
        elif BUG == "resend_after_crash":
            attempt = f"try-{secrets.token_hex(6)}"  # BUG: the mail may already have gone out
            self.note_attempt(call, attempt, "cleared")
            self.perform(call, attempt)
            return
        self.tell(call, last["outcome"])

    def recover(self) -> None:
        """Settle every call without a Tool Result, in order, then finish the turn."""
        lines = self.journal.read()
        turn = 0
        for index, line in enumerate(lines):
            if line.get("entry") != "chat":
                continue
            if line["role"] == "user":
                turn += 1
            for raw in line.get("tool_calls") or ():
                call = Call(raw["id"], raw["function"]["name"], raw["function"]["arguments"], turn)
                owned = lines[index + 1 : _scope_end(lines, index, call.id)]
                if any(o.get("entry") == "chat" and o.get("tool_call_id") == call.id for o in owned):
                    continue
                attempts = [o for o in owned if o.get("entry") == "attempt" and o["call"] == call.id]
                self.settle(call, attempts)
        messages = self.conversation()
        if messages and (messages[-1]["role"] != "assistant" or messages[-1].get("tool_calls")):
            self.think()

    # -- the loop ---------------------------------------------------------------------------

    def think(self) -> None:
        """Ask the model until it answers without tool calls."""
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
            record: dict[str, Any] = {"entry": "chat", "role": "assistant", "content": reply.content or ""}
            if calls:
                record["tool_calls"] = calls
            self.journal.write(record)
            if not calls:
                print(f"memo: {reply.content or ''}")
                return
            turn = sum(1 for m in self.conversation() if m["role"] == "user")
            for raw in calls:
                self.handle(Call(raw["id"], raw["function"]["name"], raw["function"]["arguments"], turn))

    def chat(self, text: str) -> None:
        self.journal.write({"entry": "chat", "role": "user", "content": text})
        self.think()


def _plan(attempt: dict[str, Any]) -> dict[str, Any]:
    return {k: attempt[k] for k in ("base", "after") if k in attempt}


def _scope_end(lines: list[dict[str, Any]], index: int, call_id: str) -> int:
    """Where the call made at ``index`` stops owning the journal: the next user line, or the
    next assistant line that reuses its id."""
    for j in range(index + 1, len(lines)):
        line = lines[j]
        if line.get("entry") != "chat":
            continue
        if line["role"] == "user" or call_id in [c["id"] for c in line.get("tool_calls") or ()]:
            return j
    return len(lines)


def main() -> None:
    client = OpenAI(
        base_url=os.environ.get("OPENAI_BASE_URL"),
        api_key=os.environ.get("OPENAI_API_KEY"),
        max_retries=0,
        timeout=60,
    )
    journal = Journal(Path(os.environ.get("MEMO_AGENT_JOURNAL", str(JOURNAL))))
    drop_torn_tail(journal.path)
    agent = MemoAgent(
        Path.cwd(),
        journal,
        client,
        os.environ.get("MEMO_AGENT_MODEL", "gpt-4o-mini"),
        os.environ.get("MEMO_AGENT_ORDERS_URL", "http://127.0.0.1:8080"),
    )
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
