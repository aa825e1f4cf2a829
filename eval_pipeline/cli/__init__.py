"""The `eval-pipeline` command line."""

from eval_pipeline.cli._main import build_parser, main, run

__all__ = ["build_parser", "main", "run"]
