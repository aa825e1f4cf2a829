"""The `eval-pipeline` command line."""

from eval_pipeline.cli._main import main

__all__ = ["main"]
