"""``crashmatrix import-mcp --server CMD`` / ``--url URL``: contracts from a live MCP server's
``tools/list``, read with the official ``mcp`` client (harness.agents.mcp_upstream), classified
by the same pure rules as a saved list (harness.input.mcp_import); whatever stops the read is
one line naming the command and what to do.

Slow: every test starts a server (the notes server of tests/mcp_servers.py; the reference
filesystem server from npm where it is installed)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from crashmatrix.harness.agents.mcp_upstream import UpstreamSpec, read_tools
from crashmatrix.harness.errors import InputError
from crashmatrix.harness.front.cli import main
from crashmatrix.harness.input.contract_files import load_contract
from tests.mcp_servers import NOTES, filesystem_server, notes_over_http

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
NOTES_CMD = f"{shlex.quote(sys.executable)} {shlex.quote(str(NOTES))} {{workspace}}"


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_live_stdio_server_becomes_contracts_classified_by_our_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "contracts"
    assert main(["import-mcp", "--server", NOTES_CMD, "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["append_note.yaml", "fail_note.yaml", "read_note.yaml"]
    read, append = load_contract(out / "read_note.yaml"), load_contract(out / "append_note.yaml")
    assert (read.idempotency, read.replay_policy) == ("idempotent", "auto")
    # idempotentHint=false and not read-only: the worst case, whatever the server hoped.
    assert (append.idempotency, append.replay_policy) == ("non_idempotent", "never")
    assert append.parameters["required"] == ["name", "text"]
    # The command as given (its {workspace}, not a temporary path): a committed file is stable.
    header = (out / "append_note.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert header == f"# Tool contract generated from MCP server {NOTES_CMD}; review before committing."
    assert "{workspace}" in header


def test_workspace_in_the_command_is_an_empty_directory_removed_afterwards(tmp_path: Path) -> None:
    # The notes server writes nothing when listed; the directory it got must be gone after.
    from crashmatrix.harness.agents.mcp_upstream import live_tools

    seen = tmp_path / "seen"
    script = (
        f"import sys, pathlib; pathlib.Path({str(seen)!r}).write_text(sys.argv[1]); "
        f"exec(open({str(NOTES)!r}).read())"
    )
    _, tools = live_tools(f"{shlex.quote(sys.executable)} -c {shlex.quote(script)} {{workspace}}", None)
    assert [tool["name"] for tool in tools] == ["read_note", "append_note", "fail_note"]
    given = Path(seen.read_text())
    assert given.name.startswith("crashmatrix-import-mcp-") and not given.exists()


def test_a_live_http_server_is_read_at_its_url(tmp_path: Path) -> None:
    out = tmp_path / "contracts"
    with notes_over_http(tmp_path) as url:
        assert main(["import-mcp", "--url", url, "--out", str(out)]) == 0
    assert load_contract(out / "append_note.yaml").idempotency == "non_idempotent"
    assert (
        (out / "read_note.yaml").read_text().startswith(f"# Tool contract generated from MCP server {url};")
    )


CANNOT_READ = {
    "no program": (
        "no-such-mcp-program --flag",
        "MCP server no-such-mcp-program --flag: cannot start 'no-such-mcp-program' (no such program); "
        "give the command",
    ),
    "not MCP": (
        "sh -c 'echo hello; sleep 1'",  # still running after it printed: its line read while it runs
        "not an MCP server: it printed 'hello' on stdout, not JSON-RPC; "
        "give the command that starts an MCP server on stdio",
    ),
    "exits at once": (
        "sh -c 'echo cannot open the database >&2; exit 1'",
        "the program exited before answering the MCP handshake; "
        "its stderr ended: 'cannot open the database'; run the command by hand",
    ),
    "echoes": ("cat", "answered the MCP handshake with error -32601: Method not found"),
    "bad quoting": ("sh -c 'echo \"unclosed", "cannot split it as a shell would"),
    "unknown placeholder": ("server {dir}", "{dir} is no placeholder here ({workspace} is the only one"),
}


@pytest.mark.parametrize(("server", "says"), CANNOT_READ.values(), ids=CANNOT_READ.keys())
def test_a_server_that_cannot_be_read_is_one_line_naming_the_command_and_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: str, says: str
) -> None:
    assert main(["import-mcp", "--server", server, "--out", str(tmp_path / "out")]) == 2
    line = _one_error_line(capsys)
    assert line.startswith("crashmatrix: ") and says in line, line
    assert not (tmp_path / "out").exists()


def test_a_server_that_never_answers_times_out_in_one_line() -> None:
    with pytest.raises(InputError) as caught:
        read_tools(UpstreamSpec(command=("sleep", "60")), timeout=1)
    assert str(caught.value).startswith(
        "MCP server sleep 60: no answer to the MCP handshake and tools/list in 1 s; is it an MCP server"
    )


def test_an_url_where_no_server_listens_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["import-mcp", "--url", "http://127.0.0.1:9/mcp", "--out", str(tmp_path)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith("crashmatrix: MCP server http://127.0.0.1:9/mcp: cannot read its tools (")
    assert "is the server running and is this its MCP endpoint" in line


@pytest.mark.parametrize(
    "words",
    [[], ["tools.json", "--server", "x"], ["--server", "x", "--url", "http://h/mcp"]],
    ids=["none", "file and server", "server and url"],
)
def test_exactly_one_source_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], words: list[str]
) -> None:
    assert main(["import-mcp", *words, "--out", str(tmp_path / "out")]) == 2
    assert "import-mcp: give one of TOOLS.json, --server CMD or --url URL" in _one_error_line(capsys)


def test_the_examples_committed_contracts_are_what_the_filesystem_server_says_now(tmp_path: Path) -> None:
    """examples/mcp_filesystem/contracts/ was written by this command: if the server's tools
    change (a new npm version), the committed contracts say the old ones and this fails."""
    program = filesystem_server()
    out = tmp_path / "contracts"
    assert main(["import-mcp", "--server", f"{program} {{workspace}}", "--out", str(out)]) == 0
    committed = ROOT / "examples" / "mcp_filesystem" / "contracts"
    for name in ("edit_file",):
        ours = load_contract(committed / f"{name}.yaml")
        live = load_contract(out / f"{name}.yaml")
        assert (ours.idempotency, ours.replay_policy, ours.parameters) == (
            live.idempotency,
            live.replay_policy,
            live.parameters,
        ), name
    assert load_contract(out / "edit_file.yaml").idempotency == "non_idempotent"
