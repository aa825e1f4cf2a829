"""The `eval-pipeline` command line."""

from eval_pipeline.cli._main import build_parser, main

__all__ = ["build_parser", "main"]
