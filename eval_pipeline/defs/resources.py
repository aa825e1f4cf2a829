"""Dagster resources: the suite being evaluated, swappable in tests."""

from pathlib import Path

import dagster as dg

from eval_pipeline.pipeline import load_suite_once
from eval_pipeline.store import StoreLayout, ensure_schema_files
from eval_pipeline.suite import (
    AgentContext,
    Suite,
    SuiteConfig,
    load_agent_context,
    load_config,
)


class SuiteResource(dg.ConfigurableResource):
    """The suite folder (test files, `eval_config.yaml`, context files, dbt project).

    A run reads the suite once per process while its files stay the same (`load_suite_once`).
    """

    root: str

    @property
    def path(self) -> Path:
        return Path(self.root)

    def load(self) -> Suite:
        """The validated suite; raises `SuiteError` listing all problems."""
        return load_suite_once(self.path)

    def config(self) -> SuiteConfig:
        return load_config(self.path)

    def agent_context(self) -> AgentContext:
        return load_agent_context(self.config())

    def store(self) -> StoreLayout:
        """The suite's result store, its folders and schema files in place (results.duckdb is
        published at the end of an evaluation, `publish_results`: writers never need it)."""
        layout = StoreLayout.of(self.config())
        ensure_schema_files(layout)
        return layout
