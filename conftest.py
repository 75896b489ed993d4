"""Root conftest: the crashmatrix plugin itself is registered through the ``pytest11`` entry
point (pyproject.toml), so ``pytest scenarios/`` works in any checkout where the package is
installed. This file only keeps pytest from collecting generated case directories."""

collect_ignore_glob = ["reports/latest/*", ".crashmatrix/*"]
