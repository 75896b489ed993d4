"""Contract files: YAML validated by ``schemas/contract.schema.json``, parsed once per
process per content, checked for consistency; every problem is one ``path:line:col`` line.

A set of contracts (``load_contracts``) is also checked as a whole: a ``reconcile.lookup_tool``
may name a tool of another file, so only the set can tell whether that tool exists."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from pathlib import Path

from crashmatrix.harness.core.contracts import (
    ToolContract,
    contract_from_mapping,
)
from crashmatrix.harness.input.yamlfile import Located, load_yaml, validate

__all__ = ["load_contract", "load_contracts"]


def _check_consistency(doc: Located, contract: ToolContract) -> None:
    """Combinations the schema cannot express; each message says what to write instead."""
    data = doc.data
    if contract.idempotency == "non_idempotent" and contract.replay_policy == "auto":
        raise doc.error(
            ("replay_policy",),
            "a non_idempotent tool cannot replay automatically; write 'never' (or 'ask')",
        )
    if contract.idempotency == "non_idempotent" and contract.recovery in ("replay", "precondition"):
        raise doc.error(
            ("recovery",),
            f"a non_idempotent tool cannot recover by {contract.recovery!r}; write reconcile "
            "(with reconcile.lookup_tool), surface_uncertain or manual",
        )
    if contract.recovery == "reconcile" and not contract.lookup_tool:
        raise doc.error(
            ("recovery",),
            "reconcile needs 'reconcile: {lookup_tool: NAME}' naming the lookup tool",
        )
    mock = data.get("mock") or {}
    if mock.get("kind") in ("record_row", "lookup_row") and not mock.get("table"):
        raise doc.error(("mock", "kind"), f"mock kind {mock['kind']!r} needs 'table: NAME'")


def load_contract(path: Path | str) -> ToolContract:
    # Every scenario loads the whole catalogue: each file is parsed once per process
    # (ToolContract is frozen), again only if its bytes changed. A file that fails is not
    # cached, so it fails again with its message.
    try:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        digest = ""  # load_yaml reports it, naming the file
    return _load_contract(str(path), digest)


@functools.lru_cache(maxsize=1024)
def _load_contract(path: str, digest: str) -> ToolContract:
    doc = load_yaml(path)
    validate(doc, "contract.schema.json")
    contract = contract_from_mapping(doc.data, source=str(doc.path))
    _check_consistency(doc, contract)
    return contract


def load_contracts(paths: Iterable[Path]) -> dict[str, ToolContract]:
    """Contracts by tool name; a second file for the same name is an error, not an override."""
    found: dict[str, ToolContract] = {}
    for path in sorted(paths):
        contract = load_contract(path)
        if contract.name in found:
            doc = load_yaml(path)
            raise doc.error(
                ("name",),
                f"tool {contract.name!r} is already defined in {found[contract.name].source}; "
                "rename one of them",
            )
        found[contract.name] = contract
    _check_lookups(found)
    return found


def _check_lookups(found: dict[str, ToolContract]) -> None:
    """Every ``reconcile.lookup_tool`` names a tool that can run. Otherwise each reconcile
    call would fail and every reconcile end SIDE_EFFECT_UNCERTAIN: a result that looks
    like cautious recovery, not like a typo, so it must be refused here."""
    for contract in found.values():
        lookup = contract.lookup_tool
        if not lookup:
            continue
        target = found.get(lookup)
        if target is not None and target.has_mock_behaviour:
            continue
        doc = load_yaml(contract.source)
        if target is None:
            problem = (
                f"lookup tool {lookup!r} has no contract, so every reconcile would end "
                f"SIDE_EFFECT_UNCERTAIN; name a known tool ({', '.join(sorted(found))}) "
                f"or add a {lookup}.yaml with 'mock: {{kind: lookup_row, table: NAME}}'"
            )
        else:
            problem = (
                f"lookup tool {lookup!r} ({target.source}) has no mock behaviour, so every "
                "reconcile would end SIDE_EFFECT_UNCERTAIN; add 'mock: {kind: lookup_row, "
                "table: NAME}' to its contract"
            )
        raise doc.error(("reconcile", "lookup_tool"), problem)
