"""The corpus of broken scenario, contract and adapter files, each with the exact message it
must give.

Every file in ``data/broken/`` starts with ``# expect (scenario|contract|adapter): MESSAGE``, where
``{path}`` is the file and ``{dir}`` its directory. To cover a new mistake, add a file: the
message is part of the interface (a person reads it and fixes the file), so it is pinned.
The README states how many there are; tests/test_docs.py checks it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crashmatrix.harness.agents.adapter_file import load_foreign
from crashmatrix.harness.errors import YamlError
from crashmatrix.harness.input.contract_files import load_contract
from crashmatrix.harness.input.scenario import load_scenario

BROKEN = Path(__file__).parents[1] / "data" / "broken"
FILES = sorted(BROKEN.glob("*.yaml"))
HEADER = re.compile(r"^# expect \((scenario|contract|adapter)\): (.+)$")
LOADERS = {"scenario": load_scenario, "contract": load_contract, "adapter": load_foreign}


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_broken_file_gives_its_exact_one_line_message(path: Path) -> None:
    header = HEADER.match(path.read_text(encoding="utf-8").splitlines()[0])
    assert header, f"{path.name}: first line must be '# expect (scenario|contract|adapter): MESSAGE'"
    kind, expected = header.groups()
    loader = LOADERS[kind]
    with pytest.raises(YamlError) as caught:
        loader(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message == expected.replace("{path}", str(path)).replace("{dir}", str(path.parent.resolve()))
