"""Deliberately broken variants of the reference agent: each has ONE bug real agents have.

A harness is worth what it catches. Each mutant overrides one step of ``Agent``; the suite
must fail on every one of them (``crashmatrix mutants`` runs the kill matrix,
``tests/harness/front/test_mutation.py`` is its CI gate). Select one with
``--agent=crashmatrix.reference_agent.mutants:NAME``.

``hints`` name scenario tags, tools, boundaries or ``power_loss``: where the bug is likely
to show. ``harness.front.mutation`` runs those cases first; they never decide a verdict.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import httpx

import crashmatrix.mock_tools.calls as tool_calls
from crashmatrix.harness.agents.reference import ReferenceAdapter
from crashmatrix.harness.core.ledger import PendingCall
from crashmatrix.harness.core.records import ExecutionRecord, Message, MessageEntry, ToolCall
from crashmatrix.harness.core.session_log import encode_line
from crashmatrix.harness.core.tools import PreconditionVerdict, Toolbox, ToolContext, ToolObservation
from crashmatrix.harness.session_file import SessionWriter, fsync_directory
from crashmatrix.mock_tools import file_tools
from crashmatrix.reference_agent.agent import Agent, CallState
from crashmatrix.reference_agent.recovery import Decision, decide

__all__ = ["MUTANTS", "Mutant"]


class Mutant(Agent):
    """The reference agent with one bug; ``hints`` say where the suite should look first."""

    hints: ClassVar[tuple[str, ...]] = ()


class BlindRetry(Mutant):
    """Retries any interrupted call with a new execution, whatever its contract says
    (the email goes out twice)."""

    hints = ("send_email", "non_idempotent", "after_side_effect")

    def apply(self, decision: Decision, state: CallState, pending: PendingCall) -> None:
        if decision.close_running:
            self.close_as_unknown(state, pending)
            self.retry(state, recovery="replayed")
            return
        super().apply(decision, state, pending)


class RunningAfterSideEffect(Mutant):
    """Writes ``running`` only after the tool returned: a crash in between leaves a side
    effect the ledger says never started."""

    hints = ("send_email", "non_idempotent")

    def execute(
        self,
        state: CallState,
        execution_id: str,
        *,
        tool: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        recovery: str | None = None,
    ) -> dict[str, Any]:
        name = tool or state.call.name
        args = state.arguments if arguments is None else arguments
        ctx = ToolContext(state.call.id, execution_id, state.idempotency_key, state.arguments_sha256)
        observation = self.toolbox.execute(name, args, ctx)
        self.hook("after_side_effect", state.call.id)
        self.append_state(state, execution_id, "running", previous="approved", tool_name=name)
        self.hook("after_running", state.call.id)
        result = observation.to_result(execution_id=execution_id, idempotency=state.contract.idempotency)
        if recovery:
            result["recovery"] = recovery
        self.append_state(
            state, execution_id, observation.ledger_status, previous="running", result=result, tool_name=name
        )
        return result


class LedgerInPrompt(Mutant):
    """Sends every session record to the model, ledger lines included."""

    hints = ("send_email",)

    def prompt(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for entry in self.entries:
            if isinstance(entry, MessageEntry):
                out.append(entry.message.to_json())
            else:
                out.append({"role": "user", "content": json.dumps(entry.to_json())})
        return out


class RecoveryAppendsUser(Mutant):
    """Resumes an interrupted turn by sending a new user message ("please continue")."""

    hints = ("send_email", "after_tool_result")

    def resume(self) -> str | None:
        self.recover()
        if self.needs_continuation():
            self.append_message(Message(role="user", content="Please continue."))
            return self.continue_turn()
        return None


class UnansweredTurnDone(Mutant):
    """On restart, finishes only tool calls that are pending: a turn whose user message is
    saved and whose model reply is not is taken as answered, and the user's request is
    silently dropped (a loop that resumes from "the last tool call" and not from "the last
    message")."""

    hints = ("after_model_reply", "send_email")

    def resume(self) -> str | None:
        self.recover()
        last = self.prompt()[-1] if self.prompt() else {}
        if self.needs_continuation() and last.get("role") != "user":
            return self.continue_turn()
        return None


class TornTailBlocksForever(Mutant):
    """Treats a torn final line as fatal and waits for a person who never comes."""

    hints = ("send_email", "torn_write")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(self.writer, SessionWriter) and self.writer.repaired is not None:
            while True:  # pragma: no cover - killed by the harness's deadline
                time.sleep(1)


class NoFsync(Mutant):
    """Writes every session line with ``write()`` and never ``fsync()``s it.

    Invisible to a process crash (SIGKILL keeps the page cache); a power loss drops every
    line since the last sync, so the restarted agent finds no ``running`` for a side effect
    that happened, and does it again."""

    hints = ("power_loss", "send_email", "non_idempotent")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.writer.close()
        self.writer = _UnsyncedWriter(self.session_path, before_append=kwargs.get("before_append"))


class _UnsyncedWriter(SessionWriter):
    def append(self, record: dict[str, Any]) -> None:
        line = encode_line(record)
        if self.before_append is not None:
            self.before_append(self.path, line)
        os.write(self._fd, line)  # the bug: no os.fsync(self._fd) after it


class FsyncBeforeWrite(Mutant):
    """Calls ``fsync()`` before ``write()``, not after: each line is synced only when the
    next one is appended, so at every boundary the line just written is not yet durable.

    Every process-crash case passes (the page cache keeps the line); a power loss at a
    boundary drops its line -- the ``running`` before a side effect, the terminal state after
    it -- and the restarted agent decides from an older state."""

    hints = ("power_loss", "send_email", "non_idempotent")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.writer.close()
        self.writer = _SyncFirstWriter(self.session_path, before_append=kwargs.get("before_append"))


class _SyncFirstWriter(SessionWriter):
    def append(self, record: dict[str, Any]) -> None:
        line = encode_line(record)
        if self.before_append is not None:
            self.before_append(self.path, line)
        os.fsync(self._fd)  # the bug: the sync comes first, of what was already there
        os.write(self._fd, line)


class NoDirectoryFsync(Mutant):
    """Creates its session file and fsyncs the file, never its directory.

    Every line is synced, so a process crash and a power loss after the first life both
    find it; but the new file's directory entry is not durable until its directory is
    fsynced, so a power loss in the life that created it loses the whole file, and the
    restarted agent, with no session at all, starts the task over."""

    hints = ("power_loss", "send_email", "non_idempotent")

    def __init__(self, **kwargs: Any) -> None:
        path = Path(kwargs["session_path"])
        if not path.exists():
            # The bug: SessionWriter's create path without its fsync_directory(path.parent).
            # Created here, the writer the agent then opens finds the file already there.
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        super().__init__(**kwargs)


class NewKeyPerAttempt(Mutant):
    """Sends the service an idempotency key that includes the execution_id: every attempt
    is a new business action to the service, so the reconcile lookup (by the call's key)
    finds nothing and the retry places a second order."""

    hints = ("create_order", "keyed", "reconcile", "after_side_effect")

    def execute(
        self,
        state: CallState,
        execution_id: str,
        *,
        tool: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        recovery: str | None = None,
    ) -> dict[str, Any]:
        per_attempt = dataclasses.replace(state, idempotency_key=f"{state.idempotency_key}:{execution_id}")
        return super().execute(per_attempt, execution_id, tool=tool, arguments=arguments, recovery=recovery)


class KeyWithoutArguments(Mutant):
    """Derives the idempotency key from the session and the tool name only: a second,
    different ``create_order`` in the same session reuses the first one's key, and the
    service deduplicates (or refuses) it, so one order is missing."""

    hints = ("create_order", "keyed", "multi_turn", "multi_call")

    def make_key(self, call: ToolCall, turn: int, args_sha: str) -> str:
        return f"agent:{self.session_id}:{call.name}"


class ReplayForChangedArguments(Mutant):
    """Skips the arguments-hash check on recovery: a stored result (or an old approval) is
    reused for a tool call whose saved arguments were changed after the crash."""

    hints = ("tamper", "conflict", "before_tool_result", "after_approved")

    def apply(self, decision: Decision, state: CallState, pending: PendingCall) -> None:
        if decision.action == "conflict" and pending.executions:
            recorded = pending.executions[0][1][0].arguments_sha256 or state.arguments_sha256
            decision = decide(pending, state.contract, recorded)
        super().apply(decision, state, pending)


class ToolResultBeforeTerminal(Mutant):
    """Publishes the Tool Result before writing the execution's terminal ledger state: a
    crash in between leaves an execution ``running`` forever next to a published result."""

    hints = ("send_email", "non_idempotent", "after_tool_result")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._published_early: set[str] = set()

    def publish(self, state: CallState, result: Mapping[str, Any]) -> None:
        if state.call.id in self._published_early:
            self._published_early.discard(state.call.id)  # already sent, out of order
            return
        super().publish(state, result)

    def execute(
        self,
        state: CallState,
        execution_id: str,
        *,
        tool: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        recovery: str | None = None,
    ) -> dict[str, Any]:
        name = tool or state.call.name
        args = state.arguments if arguments is None else arguments
        self.append_state(state, execution_id, "running", previous="approved", tool_name=name)
        self.hook("after_running", state.call.id)
        ctx = ToolContext(state.call.id, execution_id, state.idempotency_key, state.arguments_sha256)
        observation = self.toolbox.execute(name, args, ctx)
        self.hook("after_side_effect", state.call.id)
        result = observation.to_result(execution_id=execution_id, idempotency=state.contract.idempotency)
        if recovery:
            result["recovery"] = recovery
        super().publish(state, result)  # the bug: the model's receipt before the ledger's
        self._published_early.add(state.call.id)
        self.append_state(
            state, execution_id, observation.ledger_status, previous="running", result=result, tool_name=name
        )
        return result


class ApprovedLeftOpen(Mutant):
    """After a crash after ``approved``, asks again; when the user now says no, publishes the
    refusal without closing the execution: it stays ``approved`` forever, superseded by
    nothing (an approval a later reader of the ledger could still act on)."""

    hints = ("approvals", "reapproval", "after_approved")

    def reask(self, state: CallState, latest: ExecutionRecord) -> None:
        if state.contract.approval == "required" and not self.approver.approve(
            state.call, self.preview(state), again=True
        ):
            # The bug: no ``rejected`` line for the execution the refusal is about.
            self.publish(state, self.rejection(state, latest.execution_id) | {"recovery": "reapproval"})
            return
        super().reask(state, latest)


class ReusedCallIdReplaysOldTurn(Mutant):
    """Looks a pending call's ledger up by tool_call_id across the whole session instead of
    after the assistant message that made it: when the provider reuses ``call_0`` in a later
    turn, the older turn's stored result is replayed and the new action never runs."""

    hints = ("reused_call_id", "multi_turn", "after_tool_call_saved")

    def refresh(self, pending: PendingCall) -> PendingCall:
        grouped: dict[str, list[ExecutionRecord]] = {}
        for entry in self.entries:  # the bug: the whole session, not entries after the site
            if isinstance(entry, ExecutionRecord) and entry.tool_call_id == pending.call.id:
                grouped.setdefault(entry.execution_id, []).append(entry)
        return PendingCall(pending.site, tuple((eid, tuple(h)) for eid, h in grouped.items()))

    def apply(self, decision: Decision, state: CallState, pending: PendingCall) -> None:
        pending = self.refresh(pending)
        super().apply(decide(pending, state.contract, state.arguments_sha256), state, pending)


_SEED_004_PREFIX = re.compile(r"^(pwd|ls|find|rg|cat|sed|wc)\b")


class PrefixRegexClassifier(Mutant):
    """Classifies ``run_command`` by seed 004's own sketch, the prefix regex
    ``^(pwd|ls|find|rg|cat|sed|wc)\\b``: ``ls; rm -rf src`` starts with ``ls``, so it is
    "read-only", runs unapproved and unledgered, and is replayed after a crash."""

    hints = ("compound", "run_command")

    def call_state(self, call: ToolCall, turn: int) -> CallState:
        state = super().call_state(call, turn)
        command = state.arguments.get("command")
        if call.name == "run_command" and isinstance(command, str) and _SEED_004_PREFIX.match(command):
            read_only = dataclasses.replace(
                state.contract,
                idempotency="idempotent",
                replay_policy="auto",
                recovery="replay",
                approval="auto",
                ledger=False,
                side_effects=(),
                reason="matches the read-only prefix regex",
            )
            return dataclasses.replace(state, contract=read_only)
        return state


def _unsynced_replace(path: Path, data: bytes, *, step: Callable[[], None] | None = None) -> None:
    """``atomic_write`` without its file fsync: write tmp, rename, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)  # the bug: no os.fsync(handle.fileno()) before the rename
    if step is not None:
        step()
    os.replace(tmp_name, path)
    fsync_directory(path.parent)


class _UnsyncedRenameToolbox:
    """The agent's toolbox with write_file's replace swapped for ``_unsynced_replace`` while
    a call runs (the mock tools themselves are untouched)."""

    def __init__(self, inner: Toolbox) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation:
        # By name: write_file looks ``atomic_write`` up in its module at call time.
        original = getattr(file_tools, "atomic_write")  # noqa: B009
        setattr(file_tools, "atomic_write", _unsynced_replace)  # noqa: B010
        try:
            return self.inner.execute(name, arguments, ctx)
        finally:
            setattr(file_tools, "atomic_write", original)  # noqa: B010

    def plan(self, name: str, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        return self.inner.plan(name, arguments)

    def check_precondition(
        self, name: str, arguments: Mapping[str, Any], plan: Mapping[str, Any]
    ) -> PreconditionVerdict:
        return self.inner.check_precondition(name, arguments, plan)


class UnsyncedRename(Mutant):
    """Replaces a file by write tmp -> rename -> fsync dir, never fsyncing the temp file
    (the ext4 zero-length-file bug).

    A process crash keeps the page cache, so every plain crash case passes; after a power
    loss the rename is durable (its directory was synced) but the new inode's bytes are not:
    the target is empty, neither its old content nor its new one."""

    hints = ("power_loss", "write_file", "after_side_effect")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.toolbox = _UnsyncedRenameToolbox(self.toolbox)


def _in_place_write(path: Path, data: bytes, *, step: Callable[[], None] | None = None) -> None:
    """A write that truncates the target and writes it in place, in two halves, then
    fsyncs: durable once done, but not atomic (a reader or a crash between the halves sees
    half the new content and none of the old)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        half = len(data) // 2
        os.write(fd, data[:half])
        if step is not None:
            step()  # the bug: the old content is already gone, the new one half there
        os.write(fd, data[half:])
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_directory(path.parent)


class _InPlaceWriteToolbox(_UnsyncedRenameToolbox):
    """The agent's toolbox with write_file's replace swapped for ``_in_place_write`` while a
    call runs (the mock tools themselves are untouched)."""

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation:
        original = getattr(file_tools, "atomic_write")  # noqa: B009
        setattr(file_tools, "atomic_write", _in_place_write)  # noqa: B010
        try:
            return self.inner.execute(name, arguments, ctx)
        finally:
            setattr(file_tools, "atomic_write", original)  # noqa: B010


class NonAtomicWriteFile(Mutant):
    """write_file truncates the target and writes the new content in place, in two halves,
    fsynced at the end.

    Every crash between the steps of a tool call finds the old file or the new one, and a
    power loss after the write finds it synced; only a crash inside the write
    (``during_side_effect``) leaves half a file, which recovery can only call a conflict:
    the user's old content is lost and the new one never arrives."""

    hints = ("during_side_effect", "write_file")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.toolbox = _InPlaceWriteToolbox(self.toolbox)


class NoSessionLease(Mutant):
    """Takes no lease on its session: a second process started on the same session (a job
    redelivered while the first worker still runs) recovers the same pending call at the
    same time, and a call the ledger says never started runs twice.

    One process at a time, every crash and power loss recovers correctly: only two lives
    resuming one session at once (``double@P``) tell it from the reference agent."""

    hints = ("double_resume",)

    def take_lease(self) -> None:
        return None


class ClosedMarkFirst(Mutant):
    """Notes which interrupted executions it has closed as ``unknown`` in a file beside its
    session (so that a restart never closes one twice), and writes that note, synced, BEFORE
    the ``unknown`` record itself.

    Every boundary sees the two agree: the note and the record are both durable by the next
    one. Only a crash in the middle of the record's own append -- a torn write of the
    recovering life's recovery record (``recovery_torn_writes``) -- tells it from the
    reference agent: the note claims a record that never became durable, the next life skips
    the close, and the execution stays ``running`` under the Tool Result it publishes."""

    hints = ("recovery_torn_writes", "send_email", "non_idempotent", "after_running")

    def _closed_note(self) -> Path:
        return self.session_path.with_name(self.session_path.name + ".closed")

    def close_as_unknown(self, state: CallState, pending: PendingCall) -> dict[str, Any]:
        latest = pending.latest
        assert latest is not None
        note = self._closed_note()
        closed = note.read_text(encoding="utf-8").split() if note.exists() else []
        if latest.execution_id in closed:
            return dict(latest.result or {})  # the bug: the note says closed; the ledger may not
        fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, f"{latest.execution_id}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return super().close_as_unknown(state, pending)


class KeyWithoutTurn(Mutant):
    """Derives the idempotency key from the session, the tool_call_id, the tool and the
    arguments, but not the turn: when a provider reuses ``call_0`` in a later turn for the
    same order again, the second order carries the first one's key, the service
    deduplicates it, and the user's second order is never placed (told it was)."""

    hints = ("create_order", "keyed", "reused_call_id", "multi_turn")

    def make_key(self, call: ToolCall, turn: int, args_sha: str) -> str:
        return f"agent:{self.session_id}:{call.id}:{call.name}:{args_sha[:16]}"


class ContractPerTool(Mutant):
    """Classifies a tool once per life and reuses that contract for every later call of it:
    ``run_command("ls")`` then ``run_command("echo shipped >> audit.log")`` in one message
    makes the append "read-only" too (unapproved, unledgered, replayed after a crash)."""

    hints = ("run_command", "multi_call", "two_classes")

    def call_state(self, call: ToolCall, turn: int) -> CallState:
        state = super().call_state(call, turn)
        cache: dict[str, Any] = self.__dict__.setdefault("_contracts", {})
        contract = cache.setdefault(call.name, state.contract)  # the bug: per tool, not per call
        return dataclasses.replace(state, contract=contract)


class RetrySwallowsLastError(Mutant):
    """Retries a read-only call that failed with a retryable error once, and when the retry
    fails too, returns an empty success (a retry helper whose exhausted loop falls through to
    its default result): the model reads that the file is empty."""

    hints = ("read_file", "fault", "times_2")

    def run_unledgered(self, state: CallState) -> None:
        ctx = ToolContext(state.call.id, "", state.idempotency_key, state.arguments_sha256)
        observation = self.toolbox.execute(state.call.name, state.arguments, ctx)
        self.hook("after_side_effect", state.call.id)
        if not observation.ok and observation.retryable:
            observation = self.toolbox.execute(state.call.name, state.arguments, ctx)
            if not observation.ok:  # the bug: the last error swallowed, a default result instead
                path = state.arguments.get("path")
                observation = ToolObservation(ok=True, data={"path": path, "content": "", "truncated": False})
        self.publish(state, observation.to_result(execution_id=None, idempotency=state.contract.idempotency))


# -- the tool side's failures, misread by the agent's tool client (issue 32) -----------------
# The mock tools word every answer lost in one place (``mock_tools.calls.answer_lost``); these
# mutants swap it for a broken one while their calls run, the mock tools themselves untouched.

_ANSWER_LOST = tool_calls.answer_lost
# What a client sees when the connection drops after it sent: no timeout, a broken connection.
_CONNECTION_ERRORS = (ConnectionError, httpx.NetworkError, httpx.RemoteProtocolError)


class _SentAgain(Exception):
    """Raised out of the wrapped toolbox to resend the call (``_ResendingToolbox``)."""


def _connection_error_means_not_sent(
    call: tool_calls.Call, error: Exception, *, side_effecting: bool
) -> ToolObservation:
    if isinstance(error, _CONNECTION_ERRORS):
        raise _SentAgain from error  # the bug: "the connection failed, so nothing got there"
    return _ANSWER_LOST(call, error, side_effecting=side_effecting)


def _unreadable_answer_succeeded(
    call: tool_calls.Call, error: Exception, *, side_effecting: bool
) -> ToolObservation:
    if isinstance(error, ValueError) and side_effecting:
        # The bug: the service said 2xx (or the backend returned), so it worked.
        return ToolObservation(ok=True, data={"answer": "unreadable"}, content=f"{call.name}: done")
    return _ANSWER_LOST(call, error, side_effecting=side_effecting)


class _AnswerLostToolbox(_UnsyncedRenameToolbox):
    """The agent's toolbox with ``answer_lost`` swapped for ``wording`` while a call runs."""

    wording: ClassVar[Callable[..., ToolObservation]]

    def run(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation:
        original = tool_calls.answer_lost
        tool_calls.answer_lost = type(self).wording
        try:
            return self.inner.execute(name, arguments, ctx)
        finally:
            tool_calls.answer_lost = original

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation:
        return self.run(name, arguments, ctx)


class _ResendingToolbox(_AnswerLostToolbox):
    wording = staticmethod(_connection_error_means_not_sent)

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation:
        try:
            return self.run(name, arguments, ctx)
        except _SentAgain:
            # A client that makes a key per request (as some SDKs do by default) resends
            # under a new one: the service cannot know it is the same order.
            again = dataclasses.replace(ctx, idempotency_key=f"{ctx.idempotency_key}:resent")
            return self.run(name, arguments, again)


class _TrustingToolbox(_AnswerLostToolbox):
    wording = staticmethod(_unreadable_answer_succeeded)


class ConnectionErrorResent(Mutant):
    """Its tool client takes a connection dropped after the request went out for one that
    never arrived, and sends the call again at once under a new idempotency key (a sandbox or
    service restarting mid-call: the effect happens twice).

    No crash makes a connection drop, and a lost response that times out (``response_lost``)
    stays uncertain: only a tool side that dies mid-call (``tool_server_died``) shows it."""

    hints = ("tool_server_died", "send_email", "create_order")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.toolbox = _ResendingToolbox(self.toolbox)


class MalformedAnswerSucceeded(Mutant):
    """Its tool client reports success when a side-effecting call's answer cannot be read
    (a 2xx whose body is cut off, an answer that is not JSON): the model is told the order is
    placed on a guess, without a lookup. Only a malformed answer (``tool_result_malformed``)
    shows it."""

    hints = ("tool_result_malformed", "create_order", "send_email")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.toolbox = _TrustingToolbox(self.toolbox)


def _adapter(agent_class: type[Mutant], name: str) -> type[ReferenceAdapter]:
    return type(
        f"{agent_class.__name__}Adapter",
        (ReferenceAdapter,),
        {"agent_class": agent_class, "name": name, "hints": agent_class.hints},
    )


MUTANTS: dict[str, type[Mutant]] = {
    "blind_retry": BlindRetry,
    "running_after_side_effect": RunningAfterSideEffect,
    "ledger_in_prompt": LedgerInPrompt,
    "recovery_appends_user": RecoveryAppendsUser,
    "unanswered_turn_done": UnansweredTurnDone,
    "torn_tail_blocks_forever": TornTailBlocksForever,
    "no_fsync": NoFsync,
    "fsync_before_write": FsyncBeforeWrite,
    "no_directory_fsync": NoDirectoryFsync,
    "new_key_per_attempt": NewKeyPerAttempt,
    "key_without_arguments": KeyWithoutArguments,
    "replay_for_changed_arguments": ReplayForChangedArguments,
    "tool_result_before_terminal": ToolResultBeforeTerminal,
    "approved_left_open": ApprovedLeftOpen,
    "reused_call_id_replays_old_turn": ReusedCallIdReplaysOldTurn,
    "prefix_regex_classifier": PrefixRegexClassifier,
    "unsynced_rename": UnsyncedRename,
    "non_atomic_write_file": NonAtomicWriteFile,
    "connection_error_resent": ConnectionErrorResent,
    "malformed_answer_succeeded": MalformedAnswerSucceeded,
    "key_without_turn": KeyWithoutTurn,
    "contract_per_tool": ContractPerTool,
    "retry_swallows_last_error": RetrySwallowsLastError,
    "no_session_lease": NoSessionLease,
    "closed_mark_first": ClosedMarkFirst,
}

# One adapter class per mutant, so ``--agent=crashmatrix.reference_agent.mutants:NAME`` loads it.
blind_retry = _adapter(BlindRetry, "blind_retry")
running_after_side_effect = _adapter(RunningAfterSideEffect, "running_after_side_effect")
ledger_in_prompt = _adapter(LedgerInPrompt, "ledger_in_prompt")
recovery_appends_user = _adapter(RecoveryAppendsUser, "recovery_appends_user")
unanswered_turn_done = _adapter(UnansweredTurnDone, "unanswered_turn_done")
torn_tail_blocks_forever = _adapter(TornTailBlocksForever, "torn_tail_blocks_forever")
no_fsync = _adapter(NoFsync, "no_fsync")
fsync_before_write = _adapter(FsyncBeforeWrite, "fsync_before_write")
no_directory_fsync = _adapter(NoDirectoryFsync, "no_directory_fsync")
new_key_per_attempt = _adapter(NewKeyPerAttempt, "new_key_per_attempt")
key_without_arguments = _adapter(KeyWithoutArguments, "key_without_arguments")
replay_for_changed_arguments = _adapter(ReplayForChangedArguments, "replay_for_changed_arguments")
tool_result_before_terminal = _adapter(ToolResultBeforeTerminal, "tool_result_before_terminal")
approved_left_open = _adapter(ApprovedLeftOpen, "approved_left_open")
reused_call_id_replays_old_turn = _adapter(ReusedCallIdReplaysOldTurn, "reused_call_id_replays_old_turn")
prefix_regex_classifier = _adapter(PrefixRegexClassifier, "prefix_regex_classifier")
unsynced_rename = _adapter(UnsyncedRename, "unsynced_rename")
non_atomic_write_file = _adapter(NonAtomicWriteFile, "non_atomic_write_file")
connection_error_resent = _adapter(ConnectionErrorResent, "connection_error_resent")
malformed_answer_succeeded = _adapter(MalformedAnswerSucceeded, "malformed_answer_succeeded")
key_without_turn = _adapter(KeyWithoutTurn, "key_without_turn")
contract_per_tool = _adapter(ContractPerTool, "contract_per_tool")
retry_swallows_last_error = _adapter(RetrySwallowsLastError, "retry_swallows_last_error")
no_session_lease = _adapter(NoSessionLease, "no_session_lease")
closed_mark_first = _adapter(ClosedMarkFirst, "closed_mark_first")
