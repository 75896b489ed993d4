"""crashmatrix's harness, one package per stage of a crash case's data path:

    input  ->  plan  ->  lives  ->  observation  ->  verdict  ->  (reports)

* ``core``: the pure vocabulary every stage shares (records, the ledger state machine,
  boundaries and crash points, contracts and the command classifier, the scenario value,
  the trace's life records, world events, the tool protocol);
* ``input``: scenario and contract files (YAML, JSON Schema), MCP import;
* ``plan``: which cases a matrix has (points from a clean run, recovery windows, reruns);
* ``lives``: the agent's processes (fork server, a life, the crash injector, power loss,
  parent death, first crashes shared by two items, case directories);
* ``observation``: everything a case left, read once into one frozen value;
* ``verdict``: expectations, invariants and the verdict, pure functions of the observation;
* ``agents``: the adapter protocol and the adapters (the reference binding, kind 2, kind 3);
* ``front``: the front doors (pytest plugin, CLI, explore, the kill matrix) and the one
  function that takes a case through the stages in order (``front.cases``).

``session_file`` (durable appends and reading of a session JSONL) and ``errors`` serve all.
See docs/ARCHITECTURE.md.
"""
