"""The pure core: values and functions every stage shares. Nothing here starts a process,
opens a socket or a database, or reads YAML (``tests/test_layout.py`` checks it, imports of
imports included)."""
