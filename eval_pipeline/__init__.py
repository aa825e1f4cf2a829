"""Evaluate AI analytics agents: test files → runs → grades → summaries, as Dagster assets."""

__version__ = "0.1.0"
