"""``--agent`` names: crashmatrix's own modules as the checkout's folders read
(``reference_agent.mutants:NAME``) load the installed module, from any directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.agents.loading import load_adapter, preload_for
from crashmatrix.harness.errors import InputError
from crashmatrix.reference_agent import mutants


@pytest.mark.parametrize(
    "spec",
    ["reference_agent.mutants:blind_retry", "crashmatrix.reference_agent.mutants:blind_retry"],
)
def test_a_mutant_loads_by_the_folder_name_and_the_installed_name_alike(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # nowhere near a checkout: only the installed name imports
    adapter = load_adapter(spec)
    # The installed module's class, never a second copy imported by the folder's bare name.
    assert type(adapter) is mutants.blind_retry
    assert preload_for(spec) == ("crashmatrix.reference_agent.mutants",)


def test_a_name_that_is_not_crashmatrixs_is_imported_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"cannot import 'team_agents\.mine'"):
        load_adapter("team_agents.mine:build")
    with pytest.raises(InputError, match=r"cannot import 'reference_agent\.no_such'"):
        load_adapter("reference_agent.no_such:build")
