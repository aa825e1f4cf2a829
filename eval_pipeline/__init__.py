"""Evaluate AI analytics agents: test files → runs → grades → summaries, as Dagster assets."""

from importlib import metadata

try:
    __version__ = metadata.version("eval-pipeline")  # pyproject.toml's, as installed
except metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
