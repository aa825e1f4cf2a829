"""The code location Dagster loads (`workspace.yaml`, `dagster dev`, `dg dev`)."""

from eval_pipeline.defs import build_definitions, default_suite_root

defs = build_definitions(default_suite_root())
