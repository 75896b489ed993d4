"""``crashmatrix schema KIND``: the installed schema, printed whole or located, so a team's
adapter can name it without a checkout of crashmatrix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crashmatrix.harness.front import cli


@pytest.mark.parametrize("kind", ["adapter", "scenario", "contract", "results"])
def test_the_printed_schema_is_the_installed_file_and_a_json_schema(
    kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["schema", kind]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed)["$schema"].startswith("https://json-schema.org/")
    assert cli.main(["schema", kind, "--path"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.is_file() and path.read_text(encoding="utf-8") == printed


def test_an_unknown_kind_is_refused_with_the_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["schema", "nonsense"])
    assert exit_.value.code == 2
    assert "choose from 'adapter', 'contract', 'results', 'scenario'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    # `crashmatrix ... | head`: the pipe closes before everything was printed.
    import subprocess
    import sys

    command = subprocess.Popen(
        [sys.executable, "-m", "crashmatrix.harness.front.cli", "schema", "adapter"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert command.stdout is not None and command.stderr is not None
    command.stdout.close()  # gone before the first write
    said = command.stderr.read().decode()
    assert command.wait(timeout=60) == 141, said  # 128 + SIGPIPE, as a shell tool's
    assert "Traceback" not in said and "BrokenPipeError" not in said, said
