"""Renders the pass matrix from a results file."""
