"""crashmatrix's harness: session/ledger format, contracts, crash injection, invariants."""
